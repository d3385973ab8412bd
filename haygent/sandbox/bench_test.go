package sandbox

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"
)

// BenchmarkExecTrue is the baseline for BenchmarkRunTrue: a bare
// exec.Command("true").Run().
func BenchmarkExecTrue(b *testing.B) {
	if _, err := exec.LookPath("true"); err != nil {
		b.Skip("no true program:", err)
	}
	for b.Loop() {
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExecTrueCaptured adds to BenchmarkExecTrue what Run always
// does besides: a new session (on Linux), and stdout and stderr captured through
// pipes.
func BenchmarkExecTrueCaptured(b *testing.B) {
	if _, err := exec.LookPath("true"); err != nil {
		b.Skip("no true program:", err)
	}
	for b.Loop() {
		var out, errOut bytes.Buffer
		cmd := exec.Command("true")
		cmd.Stdout, cmd.Stderr = &out, &errOut
		cmd.SysProcAttr = sysProcAttr(nsNone)
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunTrue runs `true` through Run, on the host network and in a
// network namespace, so that Run's overhead over BenchmarkExecTrue can be
// read. "netns" uses the mode Available picked; "netns-only", run as
// root, forces a network namespace without a user namespace, to show what
// the user namespace costs.
func BenchmarkRunTrue(b *testing.B) {
	if _, err := resolve("true", nil, "/"); err != nil {
		b.Skip("no true program:", err)
	}
	for _, c := range []struct {
		name      string
		noNetwork bool
		force     nsMode
	}{{"host", false, nsNone}, {"netns", true, nsNone}, {"netns-only", true, nsNet}} {
		b.Run(c.name, func(b *testing.B) {
			if ok, reason := Available(); c.noNetwork && !ok {
				b.Skip("no network namespaces:", reason)
			}
			if c.force != nsNone {
				if os.Geteuid() != 0 {
					b.Skip("needs root")
				}
				defer func(f func() (nsMode, string)) { netnsMode = f }(netnsMode)
				netnsMode = func() (nsMode, string) { return c.force, "" }
			}
			s := Spec{Argv: []string{"true"}, Dir: b.TempDir(), NoNetwork: c.noNetwork}
			for b.Loop() {
				res, err := Run(context.Background(), s)
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("err %v, exit %d", err, res.ExitCode)
				}
			}
		})
	}
}

// BenchmarkConfinedTrue runs `true` confined, as every exec step runs:
// its init, namespaces, fresh /proc and Landlock; "proxy" adds the network
// proxy and its bridge. Read against BenchmarkExecTrue: the target is
// under 15 ms more per step.
func BenchmarkConfinedTrue(b *testing.B) {
	if ok, why := Confinement(); !ok {
		b.Skip("no confinement here:", why)
	}
	for _, c := range []struct {
		name  string
		check NetCheck
	}{{"none", nil}, {"proxy", func(string) (bool, string) { return false, "no" }}} {
		b.Run(c.name, func(b *testing.B) {
			s := Spec{Argv: []string{"true"}, Dir: b.TempDir(), Confine: true, NetCheck: c.check}
			for b.Loop() {
				res, err := Run(context.Background(), s)
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("err %v, exit %d", err, res.ExitCode)
				}
			}
		})
	}
}

//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func init() {
	// setns-dial tries to enter the network namespace at $NETNS, then
	// dials $ADDR like dial.
	helpers["setns-dial"] = func() int {
		runtime.LockOSThread()
		f, err := os.Open(os.Getenv("NETNS"))
		if err == nil {
			err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "setns:", err)
		}
		return dial(os.Getenv("ADDR"))
	}
}

func escapeAttr(escape bool) *syscall.SysProcAttr {
	if escape {
		return &syscall.SysProcAttr{Setsid: true}
	}
	return nil
}

func run(t *testing.T, s Spec) *Result {
	t.Helper()
	res, err := Run(context.Background(), s)
	if err != nil {
		t.Fatalf("Run: %v (result %+v)", err, res)
	}
	return res
}

func TestExitCodeAndOutput(t *testing.T) {
	for _, code := range []int{0, 1, 7} {
		s := helperSpec(t, "echo", "OUT", "to stdout", "ERR", "to stderr", "CODE", strconv.Itoa(code))
		res := run(t, s)
		if res.ExitCode != code || res.Signal != "" || res.TimedOut {
			t.Errorf("code %d: got ExitCode %d, Signal %q, TimedOut %v", code, res.ExitCode, res.Signal, res.TimedOut)
		}
		if string(res.Stdout) != "to stdout" || string(res.Stderr) != "to stderr" {
			t.Errorf("code %d: stdout %q, stderr %q", code, res.Stdout, res.Stderr)
		}
		if res.StdoutTruncated || res.StderrTruncated {
			t.Errorf("code %d: truncated", code)
		}
		if !slices.Equal(res.Argv, s.Argv) || res.Path != s.Argv[0] {
			t.Errorf("Argv %q, Path %q; want %q", res.Argv, res.Path, s.Argv)
		}
		if res.Started.IsZero() || res.Finished.Before(res.Started) {
			t.Errorf("Started %v, Finished %v", res.Started, res.Finished)
		}
		want := []string{"scrubbed-env", "new-session", "timeout"}
		if !slices.Equal(res.Isolation, want) || len(res.Limitations) != 0 {
			t.Errorf("Isolation %q, Limitations %q; want %q and none", res.Isolation, res.Limitations, want)
		}
	}
}

func TestStdin(t *testing.T) {
	s := helperSpec(t, "echo")
	s.Stdin = bytes.Repeat([]byte("in"), 1<<20) // more than a pipe holds
	res := run(t, s)
	if !bytes.Equal(res.Stdout, s.Stdin) {
		t.Errorf("stdout is %d bytes, want the %d bytes of stdin", len(res.Stdout), len(s.Stdin))
	}

	// A command that does not read its input still ends.
	s = Spec{Argv: []string{"/bin/sh", "-c", "exit 0"}, Dir: t.TempDir(), Stdin: s.Stdin}
	if res := run(t, s); res.ExitCode != 0 {
		t.Errorf("exit %d", res.ExitCode)
	}
}

func TestWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	res := run(t, Spec{Argv: []string{"/bin/sh", "-c", "pwd -P"}, Dir: dir})
	want, _ := filepath.EvalSymlinks(dir)
	if got := strings.TrimSpace(string(res.Stdout)); got != want {
		t.Errorf("pwd %q, want %q", got, want)
	}
}

func TestEnvScrubbed(t *testing.T) {
	t.Setenv("HG_PARENT_SECRET", "x")
	s := helperSpec(t, "env", "FOO", "bar")
	res := run(t, s)
	got := strings.Fields(string(res.Stdout))
	slices.Sort(got)
	want := []string{"FOO=bar", "GORACE=atexit_sleep_ms=0", helperVar + "=env"}
	if !slices.Equal(got, want) {
		t.Errorf("child environment %q, want exactly %q", got, want)
	}

	res = run(t, Spec{Argv: []string{"/bin/sh", "-c", `echo "${HG_PARENT_SECRET-unset} ${HOME-unset}"`}, Dir: t.TempDir()})
	if got := strings.TrimSpace(string(res.Stdout)); got != "unset unset" {
		t.Errorf("sh saw %q, want %q", got, "unset unset")
	}
}

// alive reports whether pid names a process that is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// waitDead fails t unless pid dies within 10s.
func waitDead(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); alive(pid); {
		if time.Now().After(deadline) {
			unix.Kill(pid, unix.SIGKILL)
			t.Fatalf("process %d still running", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// childPid parses the pid the tree helper, or a shell's echo $!, printed.
func childPid(t *testing.T, res *Result) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("no child pid in stdout %q, stderr %q", res.Stdout, res.Stderr)
	}
	return pid
}

// runUntilTimeout runs s with longer and longer time limits until the
// command, before being killed, got as far as printing something: on a
// loaded machine, starting a child can take more than a second.
func runUntilTimeout(t *testing.T, s Spec) *Result {
	t.Helper()
	for _, limit := range []time.Duration{time.Second, 5 * time.Second, 30 * time.Second} {
		s.Timeout = limit
		start := time.Now()
		res := run(t, s)
		if d := time.Since(start); d > limit+10*time.Second {
			t.Errorf("Run took %v with a %v time limit", d, limit)
		}
		if !res.TimedOut || res.ExitCode != -1 || res.Signal != "killed" {
			t.Errorf("TimedOut %v, ExitCode %d, Signal %q; want true, -1, killed", res.TimedOut, res.ExitCode, res.Signal)
		}
		if len(res.Stdout) > 0 {
			return res
		}
		t.Logf("nothing printed within %v; trying a longer limit", limit)
	}
	t.Fatal("the command never printed anything")
	return nil
}

func TestTimeoutKillsGroup(t *testing.T) {
	res := runUntilTimeout(t, helperSpec(t, "tree"))
	waitDead(t, childPid(t, res))
}

func TestTimeoutKillsShellJobs(t *testing.T) {
	if _, err := resolve("sleep", nil, "/"); err != nil {
		t.Skip("no sleep program:", err)
	}
	res := runUntilTimeout(t, Spec{
		Argv: []string{"/bin/sh", "-c", "sleep 30 & echo $!; sleep 30"},
		Dir:  t.TempDir(),
		Env:  map[string]string{"PATH": DefaultPath},
	})
	waitDead(t, childPid(t, res))
}

func TestExitKillsLeftovers(t *testing.T) {
	s := helperSpec(t, "tree", "EXIT", "1")
	start := time.Now()
	res := run(t, s)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Run took %v", d)
	}
	if res.ExitCode != 0 || res.TimedOut || len(res.Limitations) != 0 {
		t.Errorf("ExitCode %d, TimedOut %v, Limitations %q", res.ExitCode, res.TimedOut, res.Limitations)
	}
	waitDead(t, childPid(t, res))
}

func TestEscapedProcess(t *testing.T) {
	s := helperSpec(t, "tree", "EXIT", "1", "ESCAPE", "1")
	start := time.Now()
	res := run(t, s)
	pid := childPid(t, res)
	defer unix.Kill(pid, unix.SIGKILL) // it left the group, so Run did not kill it
	if d := time.Since(start); d < PipeGrace || d > PipeGrace+10*time.Second {
		t.Errorf("Run took %v, want about %v", d, PipeGrace)
	}
	if res.ExitCode != 0 || len(res.Limitations) != 1 || !strings.Contains(res.Limitations[0], "outside the command's process group") {
		t.Errorf("ExitCode %d, Limitations %q", res.ExitCode, res.Limitations)
	}
}

func TestContextCancel(t *testing.T) {
	s := helperSpec(t, "tree")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancel once the helper has started its child.
		defer cancel()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
			if _, err := os.Stat(filepath.Join(s.Dir, "child.pid")); err == nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	start := time.Now()
	res, err := Run(ctx, s)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 40*time.Second {
		t.Errorf("Run took %v", d)
	}
	if res.TimedOut || res.Signal != "killed" || res.ExitCode != -1 || res.Finished.IsZero() {
		t.Errorf("result %+v", res)
	}
	waitDead(t, childPid(t, res))

	// Already cancelled: nothing starts.
	res, err = Run(ctx, s)
	if !errors.Is(err, context.Canceled) || !res.Started.IsZero() || res.ExitCode != -1 {
		t.Errorf("err %v, result %+v", err, res)
	}
}

// listen returns the address of a TCP listener on 127.0.0.1 that accepts
// and closes connections until the test ends.
func listen(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}

func needNetns(t *testing.T) {
	t.Helper()
	if ok, reason := Available(); !ok {
		t.Skip("no network namespaces:", reason)
	}
}

func TestNoNetwork(t *testing.T) {
	needNetns(t)
	addr := listen(t)
	s := helperSpec(t, "dial", "ADDR", addr)
	if res := run(t, s); res.ExitCode != 0 {
		t.Fatalf("without NoNetwork: exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	s.NoNetwork = true
	res := run(t, s)
	if res.ExitCode != 3 {
		t.Errorf("with NoNetwork: exit %d, stderr %q; want 3 (could not connect)", res.ExitCode, res.Stderr)
	}
	if !slices.Contains(res.Isolation, "netns") || len(res.Limitations) != 0 {
		t.Errorf("Isolation %q, Limitations %q", res.Isolation, res.Limitations)
	}
	t.Logf("mode %v; child said %s", probe.mode, bytes.TrimSpace(res.Stderr))

	// The fallback for root where user namespaces are not allowed.
	if os.Geteuid() == 0 {
		defer func(f func() (nsMode, string)) { netnsMode = f }(netnsMode)
		netnsMode = func() (nsMode, string) { return nsNet, "" }
		res := run(t, s)
		if res.ExitCode != 3 || !slices.Equal(res.Isolation[len(res.Isolation)-1:], []string{"netns"}) {
			t.Errorf("network namespace only: exit %d, Isolation %q, stderr %q", res.ExitCode, res.Isolation, res.Stderr)
		}
	}
}

func TestNoNetworkCannotReenterHost(t *testing.T) {
	needNetns(t)
	if m, _ := probedMode(); m != nsUserNet {
		t.Skipf("mode %v: without a user namespace a root command can re-enter the host's", m)
	}
	s := helperSpec(t, "setns-dial", "ADDR", listen(t), "NETNS", fmt.Sprintf("/proc/%d/ns/net", os.Getpid()))
	s.NoNetwork = true
	res := run(t, s)
	if res.ExitCode != 3 {
		t.Errorf("exit %d, stderr %q; want 3 (could not connect)", res.ExitCode, res.Stderr)
	}
	t.Logf("child said %s", bytes.TrimSpace(res.Stderr))
}

func TestNoNetworkUnavailable(t *testing.T) {
	defer func(f func() (nsMode, string)) { netnsMode = f }(netnsMode)
	netnsMode = func() (nsMode, string) { return nsNone, "not today" }
	addr := listen(t)
	s := helperSpec(t, "dial", "ADDR", addr)
	s.NoNetwork = true
	res, err := Run(context.Background(), s)
	if !errors.Is(err, ErrNoIsolation) || !strings.Contains(err.Error(), "not today") || !res.Started.IsZero() {
		t.Fatalf("err %v, Started %v; want ErrNoIsolation and no start", err, res.Started)
	}
	s.AllowUnisolated = true
	res = run(t, s)
	if res.ExitCode != 0 || slices.Contains(res.Isolation, "netns") {
		t.Errorf("exit %d, Isolation %q", res.ExitCode, res.Isolation)
	}
	want := "network namespace unavailable: not today; ran with host network"
	if !slices.Equal(res.Limitations, []string{want}) {
		t.Errorf("Limitations %q, want %q", res.Limitations, want)
	}
}

func TestOutputCap(t *testing.T) {
	s := helperSpec(t, "spew", "N", "100000")
	s.MaxOutput = 1000
	res := run(t, s)
	if len(res.Stdout) != 1000 || len(res.Stderr) != 1000 || !res.StdoutTruncated || !res.StderrTruncated {
		t.Errorf("stdout %d bytes (truncated %v), stderr %d (%v); want 1000 and true",
			len(res.Stdout), res.StdoutTruncated, len(res.Stderr), res.StderrTruncated)
	}
	s.MaxOutput = 100000
	res = run(t, s)
	if len(res.Stdout) != 100000 || res.StdoutTruncated || res.StderrTruncated {
		t.Errorf("stdout %d bytes, truncated %v %v; want all and false", len(res.Stdout), res.StdoutTruncated, res.StderrTruncated)
	}
}

func TestSecretsRedacted(t *testing.T) {
	const secret = "hunter2-s3cr3t"
	s := helperSpec(t, "echo", "TOKEN", secret, "OUT", "token="+secret+"\n", "ERR", secret)
	s.Secrets = []string{secret}
	res := run(t, s)
	if string(res.Stdout) != "token="+Redacted+"\n" || string(res.Stderr) != Redacted {
		t.Errorf("stdout %q, stderr %q", res.Stdout, res.Stderr)
	}

	// A value across the cap is replaced whole, not left half, and the
	// marks count against the cap.
	s = helperSpec(t, "echo", "OUT", "0123456789"+secret+"tail")
	s.Secrets = []string{secret}
	for limit, want := range map[int64]string{
		14: "0123456789[RED",
		20: "0123456789" + Redacted,
		24: "0123456789" + Redacted,
		28: "0123456789" + Redacted + "tail",
	} {
		s.MaxOutput = limit
		res = run(t, s)
		if string(res.Stdout) != want || res.StdoutTruncated != (limit < 28) {
			t.Errorf("cap %d: stdout %q, truncated %v; want %q", limit, res.Stdout, res.StdoutTruncated, want)
		}
	}
}

func TestProgramLookup(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "hello"), []byte("#!/bin/sh\necho hello \"$@\"\n"), 0o755)
	os.WriteFile(filepath.Join(bin, "plain"), []byte("not executable"), 0o644)
	os.WriteFile(filepath.Join(dir, "local"), []byte("#!/bin/sh\necho local\n"), 0o755)

	res := run(t, Spec{Argv: []string{"hello", "a b"}, Dir: dir, Env: map[string]string{"PATH": bin}})
	if string(res.Stdout) != "hello a b\n" || res.Path != filepath.Join(bin, "hello") {
		t.Errorf("stdout %q, Path %q", res.Stdout, res.Path)
	}
	res = run(t, Spec{Argv: []string{"./local"}, Dir: dir})
	if string(res.Stdout) != "local\n" {
		t.Errorf("./local: stdout %q", res.Stdout)
	}

	for _, c := range []struct {
		argv0, path string
	}{
		{"hg-no-such-program", ""}, // default PATH
		{"hello", ""},              // not on the default PATH: the parent's PATH is not used
		{"local", "."},             // relative PATH entries are skipped
		{"local", ":"},             // so are empty ones
		{"plain", bin},             // not executable
		{"./hg-no-such-program", ""},
		{filepath.Join(dir, "nope"), ""},
	} {
		s := Spec{Argv: []string{c.argv0}, Dir: dir}
		if c.path != "" {
			s.Env = map[string]string{"PATH": c.path}
		}
		res, err := Run(context.Background(), s)
		if !errors.Is(err, exec.ErrNotFound) || !strings.Contains(err.Error(), c.argv0) {
			t.Errorf("%q in PATH %q: err %v, want one naming it and wrapping exec.ErrNotFound", c.argv0, c.path, err)
		}
		if res == nil || res.ExitCode != -1 || res.Path != "" || !res.Started.IsZero() {
			t.Errorf("%q: result %+v", c.argv0, res)
		}
	}

	t.Setenv("PATH", bin)
	if _, err := Run(context.Background(), Spec{Argv: []string{"hello"}, Dir: dir}); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("parent's PATH used: err %v", err)
	}
}

func TestSignal(t *testing.T) {
	res := run(t, Spec{Argv: []string{"/bin/sh", "-c", "kill -TERM $$"}, Dir: t.TempDir()})
	if res.ExitCode != -1 || res.Signal != "terminated" || res.TimedOut {
		t.Errorf("ExitCode %d, Signal %q, TimedOut %v", res.ExitCode, res.Signal, res.TimedOut)
	}
}

// TestGoTest runs `go test` on a small module inside the sandbox, without
// network, the way a Haygent step would.
func TestGoTest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	out, err := exec.Command(goBin, "env", "GOCACHE").Output()
	if err != nil {
		t.Skip("go env GOCACHE:", err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/step\n\ngo 1.21\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "step_test.go"), []byte(
		"package step\n\nimport \"testing\"\n\nfunc TestStep(t *testing.T) { t.Log(\"ran\") }\n"), 0o644)
	s := Spec{
		Argv: []string{"go", "test", "-v", "./..."},
		Dir:  dir,
		Env: DefaultEnv(map[string]string{
			"GOCACHE": strings.TrimSpace(string(out)),
			"HOME":    t.TempDir(),
			"TMPDIR":  t.TempDir(),
		}),
		Timeout:   5 * time.Minute,
		NoNetwork: true,
	}
	if ok, _ := Available(); !ok {
		s.AllowUnisolated = true
	}
	res := run(t, s)
	if res.ExitCode != 0 || !bytes.Contains(res.Stdout, []byte("ok  \texample.com/step")) {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	t.Logf("go test took %v; isolation %q", res.Finished.Sub(res.Started), res.Isolation)
}

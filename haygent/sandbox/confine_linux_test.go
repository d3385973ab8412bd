//go:build linux

package sandbox

import (
	"bytes"
	"github.com/haygent/hg/haygent/sandbox/initproc"
	"os/exec"
	"syscall"

	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// confined returns a Spec that runs script with /bin/sh, confined, in a
// new directory that it may write.
func confined(t *testing.T, script string) Spec {
	t.Helper()
	requireConfinement(t)
	return Spec{Argv: []string{"/bin/sh", "-c", script}, Dir: t.TempDir(), Env: DefaultEnv(nil), Timeout: time.Minute, Confine: true}
}

func TestConfinedIsolation(t *testing.T) {
	s := confined(t, "echo hi > out.txt && cat out.txt")
	res := run(t, s)
	if res.ExitCode != 0 || string(res.Stdout) != "hi\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	for _, want := range []string{"pidns", "mntns", "procfs", "netns", "landlock-fs:abi"} {
		if !slices.ContainsFunc(res.Isolation, func(s string) bool { return strings.HasPrefix(s, want) }) {
			t.Errorf("Isolation %q lacks %s", res.Isolation, want)
		}
	}
	if len(res.Limitations) != 0 {
		t.Errorf("Limitations %q", res.Limitations)
	}
}

// TestConfinedFiles: a confined command can neither read nor write
// outside its grants, by absolute path or through /proc, and nothing
// outside changes.
func TestConfinedFiles(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "key")
	os.WriteFile(secret, []byte("seed-material"), 0o600)
	cases := []struct{ name, script string }{
		{"read by path", "cat " + secret},
		{"list by path", "ls " + outside},
		{"read through the parent's /proc", fmt.Sprintf("cat /proc/%d/root%s", os.Getpid(), secret)},
		{"read the parent's environment", fmt.Sprintf("cat /proc/%d/environ", os.Getpid())},
		{"write by path", "echo x > " + filepath.Join(outside, "new")},
		{"overwrite by path", "echo x > " + secret},
		{"remove by path", "rm " + secret},
		{"write to /tmp", "echo x > /tmp/hg-confined-probe-" + filepath.Base(outside)},
		{"read the home", "ls /root"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := run(t, confined(t, c.script))
			if res.ExitCode == 0 {
				t.Errorf("%s: exit 0, stdout %q", c.script, res.Stdout)
			}
			if strings.Contains(string(res.Stdout), "seed-material") {
				t.Errorf("%s: read the secret", c.script)
			}
		})
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "seed-material" {
		t.Errorf("secret changed: %q, %v", b, err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Errorf("outside holds %d entries, want 1", len(ents))
	}
	if _, err := os.Stat("/tmp/hg-confined-probe-" + filepath.Base(outside)); err == nil {
		os.Remove("/tmp/hg-confined-probe-" + filepath.Base(outside))
		t.Error("the command wrote to /tmp")
	}
}

// TestConfinedProc: the command's /proc shows its own PID namespace
// only: the runner is not in it.
func TestConfinedProc(t *testing.T) {
	res := run(t, confined(t, "cat /proc/1/cmdline; echo; ls /proc | grep -c '^[0-9]'"))
	if res.ExitCode != 0 {
		t.Fatalf("exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], initproc.Arg0) {
		t.Fatalf("stdout %q: want the init as PID 1", res.Stdout)
	}
	if n := strings.TrimSpace(lines[1]); n != "3" && n != "4" {
		// the init, sh, and ls (and grep, if not yet gone)
		t.Errorf("%s processes visible, want only the command's own", n)
	}
}

func TestConfinedReadGrant(t *testing.T) {
	extra := t.TempDir()
	os.WriteFile(filepath.Join(extra, "f"), []byte("granted"), 0o644)
	s := confined(t, "cat "+filepath.Join(extra, "f")+"; echo x > "+filepath.Join(extra, "g"))
	s.Read = []string{extra}
	res := run(t, s)
	if string(res.Stdout) != "granted" || res.ExitCode == 0 {
		t.Errorf("exit %d, stdout %q: want the read granted and the write refused", res.ExitCode, res.Stdout)
	}
}

func TestConfinedUnavailable(t *testing.T) {
	defer func(f func() (confinement, string)) { confineMode = f }(confineMode)
	confineMode = func() (confinement, string) { return confinement{mode: nsNone}, "not today" }
	s := Spec{Argv: []string{"/bin/sh", "-c", "exit 0"}, Dir: t.TempDir(), Confine: true}
	res, err := Run(context.Background(), s)
	if !errors.Is(err, ErrNoIsolation) || !strings.Contains(err.Error(), "not today") || !res.Started.IsZero() {
		t.Fatalf("err %v, Started %v; want ErrNoIsolation and no start", err, res.Started)
	}
	s.AllowUnisolated = true
	res = run(t, s)
	if res.ExitCode != 0 || len(res.Limitations) != 2 || !strings.HasPrefix(res.Limitations[0], "unisolated: ") {
		t.Errorf("exit %d, Limitations %q", res.ExitCode, res.Limitations)
	}
}

func TestConfinedTimeoutKillsNamespace(t *testing.T) {
	s := confined(t, "sleep 60 & sleep 60")
	s.Timeout = 500 * time.Millisecond
	start := time.Now()
	res := run(t, s)
	if !res.TimedOut || time.Since(start) > 20*time.Second {
		t.Errorf("TimedOut %v after %v", res.TimedOut, time.Since(start))
	}
}

// requireConfinement skips t where confinement cannot be had, unless
// HG_REQUIRE_CONFINEMENT is set (make test sets it): then it fails.
func requireConfinement(t *testing.T) {
	t.Helper()
	if ok, why := Confinement(); !ok {
		if os.Getenv("HG_REQUIRE_CONFINEMENT") != "" {
			t.Fatal("no confinement here:", why)
		}
		t.Skip("no confinement here:", why)
	}
}

func init() {
	// fetch GETs each URL in $URLS through $HTTP_PROXY (even for
	// loopback addresses, which Go's default transport sends direct)
	// and prints "URL STATUS BODY" a line; then dials each of $DIRECT
	// and prints "ADDR dial ok|refused".
	helpers["fetch"] = func() int {
		pu, err := url.Parse(os.Getenv("HTTP_PROXY"))
		if err != nil || os.Getenv("HTTP_PROXY") == "" {
			fmt.Println("no proxy:", err)
			return 2
		}
		c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}, Timeout: 20 * time.Second}
		for _, u := range strings.Fields(os.Getenv("URLS")) {
			resp, err := c.Get(u)
			if err != nil {
				fmt.Println(u, "error", err)
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			fmt.Println(u, resp.StatusCode, string(body))
		}
		for _, a := range strings.Fields(os.Getenv("DIRECT")) {
			if dial(a) == 0 {
				fmt.Println(a, "dial ok")
			} else {
				fmt.Println(a, "dial refused")
			}
		}
		return 0
	}
}

// TestConfinedNetworkGrants: a granted 127.0.0.1 port is reachable
// through the proxy, another port of 127.0.0.1 is refused and the refusal
// recorded, and nothing is reachable around the proxy.
func TestConfinedNetworkGrants(t *testing.T) {
	requireConfinement(t)
	serve := func(body string) string {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
		return l.Addr().String()
	}
	granted, other := serve("granted"), serve("other")
	s := helperSpec(t, "fetch", "URLS", "http://"+granted+"/ http://"+other+"/", "DIRECT", granted)
	exe, _ := os.Executable()
	s.Confine, s.Read = true, []string{filepath.Dir(exe)}
	var asked []string
	s.NetCheck = func(hp string) (bool, string) {
		asked = append(asked, hp)
		if hp == granted {
			return true, "network:" + granted
		}
		return false, "no grant"
	}
	res := run(t, s)
	out := string(res.Stdout)
	for _, want := range []string{
		"http://" + granted + "/ 200 granted",
		"http://" + other + "/ 403 ",
		granted + " dial refused",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s\nstderr: %s", want, out, res.Stderr)
		}
	}
	if len(res.NetDenials) != 1 || res.NetDenials[0] != (NetDenial{Target: other, Rule: "no grant"}) {
		t.Errorf("NetDenials %+v, want one for %s", res.NetDenials, other)
	}
	if !slices.Contains(res.Isolation, "net-proxy") {
		t.Errorf("Isolation %q lacks net-proxy", res.Isolation)
	}
}

// TestConfinedGoTestOverlay: `go test` runs confined with the shared build
// cache read-only under an overlay: it compiles what it needs into its own
// layer, and the shared cache is left as it was (here: empty).
func TestConfinedGoTestOverlay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	requireConfinement(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	root, err := filepath.EvalSymlinks(goBin)
	if err != nil {
		t.Fatal(err)
	}
	scratch, shared := t.TempDir(), t.TempDir()
	dir := filepath.Join(scratch, "work")
	os.Mkdir(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/step\n\ngo 1.21\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "step_test.go"), []byte(
		"package step\n\nimport \"testing\"\n\nfunc TestStep(t *testing.T) {}\n"), 0o644)
	env := DefaultEnv(map[string]string{
		"GOCACHE": filepath.Join(scratch, "gocache"),
		"HOME":    filepath.Join(scratch, "home"),
		"TMPDIR":  filepath.Join(scratch, "tmp"),
	})
	os.Mkdir(env["HOME"], 0o700)
	os.Mkdir(env["TMPDIR"], 0o700)
	s := Spec{
		Argv: []string{"go", "test", "./..."}, Dir: dir, Env: env, Timeout: 5 * time.Minute,
		Confine: true, Write: []string{scratch},
		Read:     []string{filepath.Dir(filepath.Dir(root)), shared},
		Overlays: []Overlay{{Lower: shared, Target: env["GOCACHE"]}},
	}
	res := run(t, s)
	if res.ExitCode != 0 || !bytes.Contains(res.Stdout, []byte("ok  \texample.com/step")) {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if ents, _ := os.ReadDir(shared); len(ents) != 0 {
		t.Errorf("the shared cache holds %d entries after the step, want none", len(ents))
	}
}

func init() {
	// dialunix connects to the Unix socket at $SOCK: exit 0 if it could.
	helpers["dialunix"] = func() int {
		c, err := net.Dial("unix", os.Getenv("SOCK"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		c.Close()
		return 0
	}
}

// TestConfinedForgedStatus: a command that writes a status of its own
// into the init's status pipe and tries to end the init gets nothing for
// it: it holds no capability to open the pipe, and a status the init did
// not write is never taken.
func TestConfinedForgedStatus(t *testing.T) {
	res := run(t, confined(t, `printf '{"Code":0}\n' > /proc/1/fd/4; kill -TERM 1; sleep 1; exit 1`))
	if res.ExitCode != 1 {
		t.Errorf("exit %d (stderr %q), want the command's own 1", res.ExitCode, res.Stderr)
	}
	res = run(t, confined(t, `grep Cap /proc/self/status`))
	if !strings.Contains(string(res.Stdout), "CapEff:\t0000000000000000") || !strings.Contains(string(res.Stdout), "CapBnd:\t0000000000000000") {
		t.Errorf("the command holds capabilities:\n%s", res.Stdout)
	}
}

// TestConfinedHide: a directory under a path the command may read is out
// of its view when hidden (a workspace, a store); its siblings are not.
func TestConfinedHide(t *testing.T) {
	base := t.TempDir()
	os.MkdirAll(filepath.Join(base, "ws"), 0o755)
	os.WriteFile(filepath.Join(base, "ws", "key"), []byte("seed-material"), 0o600)
	os.WriteFile(filepath.Join(base, "other"), []byte("visible"), 0o644)
	s := confined(t, "cat "+filepath.Join(base, "other")+"; cat "+filepath.Join(base, "ws", "key"))
	s.Read, s.Hide = []string{base}, []string{filepath.Join(base, "ws")}
	res := run(t, s)
	if string(res.Stdout) != "visible" || res.ExitCode == 0 {
		t.Errorf("exit %d, stdout %q: want the sibling read and the hidden file not", res.ExitCode, res.Stdout)
	}
}

// TestConfinedHostSockets: a Unix socket of the host, outside every
// grant, cannot be reached (Landlock before ABI 9 does not guard
// connect(2); the command's root holds only what it was given).
func TestConfinedHostSockets(t *testing.T) {
	requireConfinement(t)
	sock := filepath.Join(t.TempDir(), "host.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := helperSpec(t, "dialunix", "SOCK", sock)
	// The helper from a directory of its own, which holds no socket.
	exe, _ := os.Executable()
	bin := filepath.Join(t.TempDir(), "helper")
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	s.Argv = []string{bin}
	s.Confine, s.Read = true, []string{filepath.Dir(bin)}
	if res := run(t, s); res.ExitCode != 3 {
		t.Errorf("exit %d (stderr %q): want the host's socket out of reach", res.ExitCode, res.Stderr)
	}
}

// TestConfinedInheritedDescriptors: a descriptor the runner inherited
// without close-on-exec does not reach the command.
func TestConfinedInheritedDescriptors(t *testing.T) {
	p := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(p, []byte("seed-material"), 0o600)
	fd, err := syscall.Open(p, syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	res := run(t, confined(t, fmt.Sprintf("cat <&%d", fd)))
	if res.ExitCode == 0 || strings.Contains(string(res.Stdout), "seed-material") {
		t.Errorf("exit %d, stdout %q: the command read an inherited descriptor", res.ExitCode, res.Stdout)
	}
}

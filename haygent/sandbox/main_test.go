package sandbox

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// helperVar, set in a child's environment, makes the test binary act as
// the helper program it names instead of running tests, so the tests need
// no tools besides /bin/sh.
const helperVar = "HG_SANDBOX_HELPER"

// helpers are the programs the test binary can act as. Each returns the
// exit code.
var helpers = map[string]func() int{
	// echo copies stdin to stdout, then writes $OUT to stdout and $ERR
	// to stderr, and exits with $CODE.
	"echo": func() int {
		io.Copy(os.Stdout, os.Stdin)
		fmt.Fprint(os.Stdout, os.Getenv("OUT"))
		fmt.Fprint(os.Stderr, os.Getenv("ERR"))
		code, _ := strconv.Atoi(os.Getenv("CODE"))
		return code
	},
	// env prints its environment, one entry a line.
	"env": func() int {
		for _, kv := range os.Environ() {
			fmt.Println(kv)
		}
		return 0
	},
	// dial connects to $ADDR over TCP: exit 0 if it could, 3 if not.
	"dial": func() int {
		return dial(os.Getenv("ADDR"))
	},
	// spew writes $N bytes to stdout and to stderr.
	"spew": func() int {
		n, _ := strconv.Atoi(os.Getenv("N"))
		b := []byte(strings.Repeat("x", n))
		os.Stdout.Write(b)
		os.Stderr.Write(b)
		return 0
	},
	// sleep sleeps 30 seconds.
	"sleep": func() int {
		time.Sleep(30 * time.Second)
		return 0
	},
	// tree starts a copy of itself as "sleep", sharing its stdout and
	// stderr, prints that child's pid and also writes it to child.pid,
	// and then sleeps too, or exits at once if $EXIT is set. With
	// $ESCAPE, the child leaves the process group.
	"tree": func() int {
		exe, _ := os.Executable()
		c := exec.Command(exe)
		c.Env = append(os.Environ(), helperVar+"=sleep")
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		c.SysProcAttr = escapeAttr(os.Getenv("ESCAPE") != "")
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Println(c.Process.Pid)
		os.WriteFile("child.tmp", []byte(strconv.Itoa(c.Process.Pid)), 0o644)
		os.Rename("child.tmp", "child.pid")
		if os.Getenv("EXIT") != "" {
			return 0
		}
		time.Sleep(30 * time.Second)
		return 0
	},
}

func dial(addr string) int {
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	conn.Close()
	return 0
}

func TestMain(m *testing.M) {
	if name := os.Getenv(helperVar); name != "" {
		h := helpers[name]
		if h == nil {
			fmt.Fprintf(os.Stderr, "unknown helper %q\n", name)
			os.Exit(2)
		}
		os.Exit(h())
	}
	os.Exit(m.Run())
}

// helperSpec returns a Spec that runs the test binary as helper name in a
// new directory, with a one-minute limit and kv (key, value, ...) added
// to the environment. GORACE keeps a race-enabled helper from sleeping a
// second at exit.
func helperSpec(t testing.TB, name string, kv ...string) Spec {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{helperVar: name, "GORACE": "atexit_sleep_ms=0"}
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return Spec{Argv: []string{exe}, Dir: t.TempDir(), Env: env, Timeout: time.Minute}
}

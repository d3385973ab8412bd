package boltstore

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// Some tests re-run the test binary as a child process that uses a store
// (see startChild). The child finds its orders in the environment.
const (
	envChild  = "HG_TEST_CHILD"         // "1" in a child
	envMode   = "HG_TEST_CHILD_MODE"    // what the child does: "hold", "crash", "bulkcrash" or "compact"
	envDir    = "HG_TEST_CHILD_DIR"     // the store directory
	envRun    = "HG_TEST_CHILD_RUN"     // crash, bulkcrash: which run this is, for the data
	envKillAt = "HG_TEST_CHILD_KILL_AT" // compact: the point at which the child kills itself
)

func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "1" {
		if err := child(os.Getenv(envMode), os.Getenv(envDir)); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func child(mode, dir string) error {
	switch mode {
	case "hold":
		// Hold the store as a writer until killed.
		s, err := Open(dir, &Options{Command: "hg child hold"})
		if err != nil {
			return err
		}
		defer s.Close()
		fmt.Println("ready")
		time.Sleep(2 * time.Minute)
		return nil
	case "crash":
		var run int
		if _, err := fmt.Sscan(os.Getenv(envRun), &run); err != nil {
			return fmt.Errorf("bad %s: %v", envRun, err)
		}
		return crashChild(dir, run)
	case "bulkcrash":
		var run int
		if _, err := fmt.Sscan(os.Getenv(envRun), &run); err != nil {
			return fmt.Errorf("bad %s: %v", envRun, err)
		}
		return bulkCrashChild(dir, run)
	case "compact":
		return compactChild(dir, os.Getenv(envKillAt))
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// A childProc is the test binary run as a child by startChild.
type childProc struct {
	cmd    *exec.Cmd
	lines  chan string // the child's stdout, line by line; closed at EOF
	stderr bytes.Buffer
	once   sync.Once
}

// startChild runs the test binary as a child in mode on the store in dir,
// with env added to its environment. The child is killed when the test
// ends, if not before.
func startChild(t *testing.T, mode, dir string, env ...string) *childProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &childProc{lines: make(chan string, 100000)}
	p.cmd = exec.Command(exe, "-test.run=^$")
	p.cmd.Env = append(os.Environ(), envChild+"=1", envMode+"="+mode, envDir+"="+dir)
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() { p.kill() })
	return p
}

// next returns the child's next line of output, failing t if the child
// exits or says nothing for a minute.
func (p *childProc) next(t *testing.T) string {
	t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			p.kill()
			t.Fatalf("child exited early: %s", p.stderr.String())
		}
		return line
	case <-time.After(time.Minute):
		t.Fatal("child said nothing for a minute")
	}
	return ""
}

// kill sends SIGKILL to the child, waits for it, and returns the lines it
// wrote that nobody had read.
func (p *childProc) kill() []string {
	var rest []string
	p.once.Do(func() {
		_ = p.cmd.Process.Kill()
		for line := range p.lines {
			rest = append(rest, line)
		}
		_ = p.cmd.Wait()
	})
	return rest
}

// wait waits for the child to end by itself (failing t after a minute)
// and returns the lines it wrote that nobody had read.
func (p *childProc) wait(t *testing.T) []string {
	t.Helper()
	var rest []string
	timeout := time.After(time.Minute)
	for {
		select {
		case line, ok := <-p.lines:
			if ok {
				rest = append(rest, line)
				continue
			}
			p.once.Do(func() { _ = p.cmd.Wait() })
			return rest
		case <-timeout:
			t.Fatal("the child has not ended after a minute")
		}
	}
}

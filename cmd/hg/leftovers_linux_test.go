package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// longNap writes a copy of the nap Haygent whose step sleeps for a long,
// unusual time (so its process can be told from any other) and a Work
// Order of one node that runs it, and returns the order's path and the
// sleep's argument.
func longNap(t *testing.T) (wo, arg string) {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-a", "../../fixtures/haygents/nap", filepath.Join(dir, "nap")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	arg = fmt.Sprintf("%d.%d", 300+os.Getpid()%97, time.Now().UnixNano()%1000)
	perms := fmt.Sprintf(`{"grants": ["run:command:nap", "network:none", "secret:none", "publish:none", "spend:none"],
 "commands": {"nap": ["sleep", %q]}}`, arg)
	if err := os.WriteFile(filepath.Join(dir, "nap", "permissions.json"), []byte(perms), 0o644); err != nil {
		t.Fatal(err)
	}
	manifest, _ := os.ReadFile(filepath.Join(dir, "nap", "haygent.manifest.json"))
	manifest = bytes.Replace(manifest, []byte(`"step": "30s", "run": "1m"`), []byte(`"step": "20m", "run": "30m"`), 1)
	if err := os.WriteFile(filepath.Join(dir, "nap", "haygent.manifest.json"), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	wo = filepath.Join(dir, "wo.json")
	if err := os.WriteFile(wo, []byte(`{"workorder": "long-nap", "objective": "sleep long enough to be killed",
 "nodes": {"n1": {"haygent": "nap", "input": {"value": 1}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return wo, arg
}

// sleeping returns the pids of processes running "sleep ARG".
func sleeping(arg string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.HasSuffix(bytes.TrimRight(cmdline, "\x00"), []byte("sleep\x00"+arg)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// until polls cond every 50 ms until it holds, failing t after limit.
func until(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A killed hg run leaves nothing behind: its step's process dies with it
// (the step runs under an init in its own PID namespace with a
// parent-death signal), so resume never starts the step beside a live
// one; and the temporary directories it made (the step's scratch copy,
// the workspace) are removed by the next hg command, which finds their
// owner dead.
func TestKilledRunLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a run")
	}
	hg := hgBinary(t)
	tmp := t.TempDir()
	env := append(os.Environ(), "HG_STORE=", "TMPDIR="+tmp)
	store := filepath.Join(t.TempDir(), "store")
	if out, err := exec.Command(hg, "--store", store, "init").CombinedOutput(); err != nil {
		t.Fatalf("init: %v %s", err, out)
	}
	wo, arg := longNap(t)
	cmd := exec.Command(hg, "--store", store, "run", wo)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var step []int
	exited := make(chan struct{})
	go func() { cmd.Process.Wait(); close(exited) }()
	until(t, time.Minute, "the step's sleep to start", func() bool {
		select {
		case <-exited:
			t.Fatalf("the run ended before its step started: %s", stderr.String())
		default:
		}
		step = sleeping(arg)
		return len(step) > 0
	})
	if ents, _ := os.ReadDir(tmp); len(ents) == 0 {
		t.Fatal("the run made no temporary directory")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	until(t, 30*time.Second, fmt.Sprintf("the step's process %v to die with its runner", step), func() bool {
		for _, pid := range step {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				return false
			}
		}
		return true
	})
	// The next command (any) removes what the dead run left in TMPDIR.
	pin := exec.Command(hg, "--store", store, "pin", "ls")
	pin.Env = env
	if out, err := pin.CombinedOutput(); err != nil {
		t.Fatalf("pin ls: %v %s", err, out)
	}
	var left []string
	filepath.WalkDir(tmp, func(p string, d os.DirEntry, err error) error {
		if p != tmp {
			left = append(left, strings.TrimPrefix(p, tmp))
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("the killed run's temporary files outlived it: %v", left[:min(len(left), 10)])
	}
}

// A killed hg bundle export (or get) leaves its hidden temporary file
// beside the output; the next command that writes there removes it,
// since its owner is dead, and never one whose owner lives.
func TestKilledExportLeavesNothing(t *testing.T) {
	hg := hgBinary(t)
	work := t.TempDir()
	store := filepath.Join(t.TempDir(), "store")
	hgRun(t, hg, work, 0, "--store", store, "init")
	f := filepath.Join(work, "f.bin")
	writeRandom(t, f, 256<<20, "export")
	hgRun(t, hg, work, 0, "--store", store, "put", "--pin", "f", f)
	out := t.TempDir()
	cmd := exec.Command(hg, "--store", store, "bundle", "export", "f", "-o", filepath.Join(out, "f.car"))
	cmd.Env = append(os.Environ(), "HG_STORE=")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var temp []string
	until(t, time.Minute, "the export's temporary file", func() bool {
		temp, _ = filepath.Glob(filepath.Join(out, ".hg-get-*"))
		return len(temp) > 0
	})
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if _, err := os.Stat(temp[0]); err != nil {
		t.Fatalf("the killed export left nothing to clean (%v): the trial did not try what it means to", err)
	}
	// A live writer's temporary file (this process's), which must stay.
	live, err := os.CreateTemp(out, fmt.Sprintf(".hg-get-%d-*", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := syscall.Flock(int(live.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(work, "small.txt")
	os.WriteFile(small, []byte("small"), 0o644)
	c := strings.TrimSpace(hgRun(t, hg, work, 0, "--store", store, "put", small))
	hgRun(t, hg, work, 0, "--store", store, "get", c, "-o", filepath.Join(out, "small.out"))
	if _, err := os.Stat(temp[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead export's %s is still there (%v)", temp[0], err)
	}
	if _, err := os.Stat(live.Name()); err != nil {
		t.Errorf("a live writer's temporary file was removed: %v", err)
	}
}

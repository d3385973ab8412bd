package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/haygent/hg/cas/boltstore"
)

// HG_LOCK_TIMEOUT is a validated knob: a Go duration, 0 to wait as long
// as it takes; anything else is refused as a usage error, not ignored.
func TestLockWaitKnob(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want time.Duration
		bad  bool
	}{
		{"", lockTimeout, false},
		{"500ms", 500 * time.Millisecond, false},
		{"2m", 2 * time.Minute, false},
		{"0", boltstore.Forever, false},
		{"0s", boltstore.Forever, false},
		{"banana", 0, true},
		{"3", 0, true},
		{"-1s", 0, true},
	} {
		t.Setenv("HG_LOCK_TIMEOUT", tc.env)
		got, err := lockWait()
		if tc.bad {
			if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "HG_LOCK_TIMEOUT") {
				t.Errorf("HG_LOCK_TIMEOUT=%q: %v, want a usage error naming it", tc.env, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("HG_LOCK_TIMEOUT=%q: %v, %v; want %v", tc.env, got, err, tc.want)
		}
	}
}

// A run shares the store with other writers: while another process holds
// it for far longer than the lock wait (a big hg put, say), the run waits
// for it, says so, and goes on; it never dies of it, and no node runs
// twice.
func TestRunWaitsForOtherWriters(t *testing.T) {
	if testing.Short() {
		t.Skip("takes several seconds")
	}
	hg := hgBinary(t)
	store := filepath.Join(t.TempDir(), "store")
	if out, err := exec.Command(hg, "--store", store, "init").CombinedOutput(); err != nil {
		t.Fatalf("init: %v %s", err, out)
	}
	wo, _ := filepath.Abs("../../fixtures/workorders/slow-chain.json")
	cmd := exec.Command(hg, "--store", store, "run", "-j", "1", wo)
	cmd.Env = append(os.Environ(), "HG_LOCK_TIMEOUT=200ms", "HG_STORE=")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Hold the store as a writer twice, each time for ten times the lock
	// wait, while nodes finish and want committing.
	for range 2 {
		time.Sleep(1200 * time.Millisecond)
		st, err := boltstore.Open(store, &boltstore.Options{Timeout: time.Minute, Command: "a long hg put"})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		st.Close()
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the run died: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "waiting for the store") || !strings.Contains(stderr.String(), "a long hg put") {
		t.Errorf("the run did not say what it waited for: %s", stderr.String())
	}
	run := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(stdout.String(), "\n", 2)[0], "run "))
	s, err := status(t, hg, store, run)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != "done" {
		t.Fatalf("run %s is %s", run, s.Status)
	}
	for _, n := range s.Nodes {
		if n.State != "done" || n.Attempts != 1 {
			t.Errorf("node %s: %s after %d attempts", n.Name, n.State, n.Attempts)
		}
	}
}

// hg run --json reports each node's work twice: done (accepted), then
// done and committed once it is stored. Work reported committed survives
// a kill -9 at once: after it, the node is done in the record, and it
// never runs again.
func TestRunJSONCommittedSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("takes several seconds")
	}
	hg := hgBinary(t)
	store := filepath.Join(t.TempDir(), "store")
	if out, err := exec.Command(hg, "--store", store, "init").CombinedOutput(); err != nil {
		t.Fatalf("init: %v %s", err, out)
	}
	wo, _ := filepath.Abs("../../fixtures/workorders/slow-chain.json")
	cmd := exec.Command(hg, "--store", store, "run", "--json", "-j", "1", wo)
	cmd.Env = append(os.Environ(), "HG_STORE=")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	type event struct {
		Run       string `json:"run"`
		Node      string `json:"node"`
		State     string `json:"state"`
		Committed bool   `json:"committed"`
	}
	dec := json.NewDecoder(out)
	var run string
	accepted := map[string]bool{}
	var committed event
	for committed.Node == "" {
		var ev event
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("the run ended before it said a node was committed: %v", err)
		}
		run = ev.Run
		switch {
		case ev.Committed && ev.State == "done":
			if !accepted[ev.Node] {
				t.Errorf("node %s committed before it was reported done", ev.Node)
			}
			committed = ev
		case ev.Committed:
		case ev.State == "done":
			accepted[ev.Node] = true
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	s, err := status(t, hg, store, run)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range s.Nodes {
		if n.Name == committed.Node && (n.State != "done" || n.Attempts != 1) {
			t.Fatalf("node %s was reported committed, then after the kill it is %s (%d attempts)", n.Name, n.State, n.Attempts)
		}
	}
	resume := exec.Command(hg, "--store", store, "resume", "--json", run)
	resume.Env = append(os.Environ(), "HG_STORE=")
	res, err := resume.Output()
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if strings.Contains(string(res), `"node":"`+committed.Node+`","state":"active"`) {
		t.Errorf("resume ran node %s again, which was committed", committed.Node)
	}
}

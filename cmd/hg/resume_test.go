package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hgBinary returns a path that runs this test binary as hg (testscript's
// TestMain dispatches on the program name).
func hgBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	hg := filepath.Join(dir, "hg")
	if err := os.Symlink(self, hg); err != nil {
		t.Fatal(err)
	}
	return hg
}

type nodeStatus struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Attempts int64  `json:"attempts"`
	Receipt  string `json:"receipt"`
	Reason   string `json:"reason"`
}

type runStatus struct {
	Status    string       `json:"status"`
	Executing *bool        `json:"executing"` // only while the record says running
	Nodes     []nodeStatus `json:"nodes"`
}

func status(t *testing.T, hg, store, run string) (runStatus, error) {
	out, err := exec.Command(hg, "--store", store, "status", "--json", run).Output()
	if err != nil {
		return runStatus{}, err
	}
	var s runStatus
	return s, json.Unmarshal(out, &s)
}

// TestKillAndResume kills `hg run` with SIGKILL in the middle of a Work
// Order (eight one-second nodes in a chain), checks the store is usable
// meanwhile and afterwards, and resumes
// the run: nodes accepted before the kill never run again.
func TestKillAndResume(t *testing.T) {
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
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "run ") {
		cmd.Process.Kill()
		t.Fatalf("first line %q, %v", line, err)
	}
	run := strings.TrimSpace(strings.TrimPrefix(line, "run "))

	// Wait until a node is done, use the store from "another terminal",
	// then kill the run as soon as a second node is done.
	waitDone := func(want int) {
		deadline := time.Now().Add(60 * time.Second)
		var last runStatus
		for time.Now().Before(deadline) {
			if s, err := status(t, hg, store, run); err == nil {
				last = s
				done := 0
				for _, n := range s.Nodes {
					if n.State == "done" {
						done++
					}
				}
				if done >= want {
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		cmd.Process.Kill()
		t.Fatalf("run never got %d nodes done: %+v", want, last)
	}
	waitDone(1)
	put := exec.Command(hg, "--store", store, "put", "-")
	put.Stdin = strings.NewReader("written while the run is active")
	if out, err := put.CombinedOutput(); err != nil {
		t.Errorf("hg put during the run: %v %s", err, out)
	}
	waitDone(2)
	if s, err := status(t, hg, store, run); err != nil || s.Executing == nil || !*s.Executing {
		t.Errorf("status during the run: executing %v, %v; want true", s.Executing, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	after, err := status(t, hg, store, run)
	if err != nil {
		t.Fatalf("status after the kill: %v", err)
	}
	if after.Status != "running" {
		t.Fatalf("status after the kill %q, want running (the process died)", after.Status)
	}
	if after.Executing == nil || *after.Executing {
		t.Errorf("status after the kill says executing %v, want false: no process holds the run", after.Executing)
	}
	doneBefore := map[string]string{}
	for _, n := range after.Nodes {
		if n.State == "done" {
			doneBefore[n.Name] = n.Receipt
		}
	}
	if len(doneBefore) < 2 || len(doneBefore) == len(after.Nodes) {
		t.Fatalf("killed with %d of 4 nodes done; the test needs a run cut in the middle", len(doneBefore))
	}

	var out bytes.Buffer
	resume := exec.Command(hg, "--store", store, "resume", "--no-cache", run)
	resume.Stdout, resume.Stderr = &out, &out
	if err := resume.Run(); err != nil {
		t.Fatalf("resume: %v\n%s", err, out.String())
	}
	final, err := status(t, hg, store, run)
	if err != nil {
		t.Fatal(err)
	}
	if final.Status != "done" {
		t.Fatalf("after resume: %s\n%s", final.Status, out.String())
	}
	for _, n := range final.Nodes {
		if r, ok := doneBefore[n.Name]; ok {
			if n.Attempts != 1 || n.Receipt != r {
				t.Errorf("node %s was done before the kill, but resume touched it: attempts %d, receipt %s (was %s)", n.Name, n.Attempts, n.Receipt, r)
			}
		} else if n.State != "done" {
			t.Errorf("node %s is %s after resume", n.Name, n.State)
		}
	}
	if out, err := exec.Command(hg, "--store", store, "fsck").CombinedOutput(); err != nil {
		t.Errorf("fsck after kill and resume: %v %s", err, out)
	}
}

// TestCancel cancels a run another process is executing: its running step
// is killed, its finished receipts kept, the rest cancelled.
func TestCancel(t *testing.T) {
	if testing.Short() {
		t.Skip("takes several seconds")
	}
	hg := hgBinary(t)
	store := filepath.Join(t.TempDir(), "store")
	if out, err := exec.Command(hg, "--store", store, "init").CombinedOutput(); err != nil {
		t.Fatalf("init: %v %s", err, out)
	}
	wo, _ := filepath.Abs("../../fixtures/workorders/slow-chain.json")
	cmd := exec.Command(hg, "--store", store, "run", "--run-id", "run-c", wo)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		s, err := status(t, hg, store, "run-c")
		if err == nil && len(s.Nodes) > 0 && s.Nodes[0].State == "done" {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("n1 never finished: %s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if o, err := exec.Command(hg, "--store", store, "cancel", "run-c").CombinedOutput(); err != nil {
		t.Fatalf("cancel: %v %s", err, o)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("a cancelled run exited 0:\n%s", out.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the run did not stop after cancel")
	}
	s, err := status(t, hg, store, "run-c")
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != "cancelled" {
		t.Errorf("status %s, want cancelled\n%s", s.Status, out.String())
	}
	for _, n := range s.Nodes {
		switch {
		case n.Name == "n1" && (n.State != "done" || n.Receipt == ""):
			t.Errorf("n1 finished before the cancel but is %s", n.State)
		case n.Name != "n1" && n.State != "cancelled" && n.State != "done":
			t.Errorf("node %s is %s after cancel", n.Name, n.State)
		}
	}
}

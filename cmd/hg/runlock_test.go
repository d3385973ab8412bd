//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// One process at a time executes a run: a second lock of the same run
// fails naming the holder, another run's lock is free, and the lock is
// free again once released.
func TestLockRun(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockRun(dir, "run-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockRun(dir, "run-a"); err == nil || !strings.Contains(err.Error(), "being executed by pid") {
		t.Fatalf("second lock of run-a: %v, want refused naming the holder", err)
	}
	unlockB, err := lockRun(dir, "run-b")
	if err != nil {
		t.Fatalf("run-b: %v", err)
	}
	unlockB()
	unlock()
	if _, err := os.Stat(filepath.Join(dir, activeDir, "run-a")); !os.IsNotExist(err) {
		t.Fatalf("the lock file outlived its run: %v", err)
	}
	again, err := lockRun(dir, "run-a")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again()
}

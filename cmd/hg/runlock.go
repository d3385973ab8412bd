package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// activeDir holds one lock file per run a process is executing, in the
// store directory: hg run and hg resume hold RUN's for as long as they
// execute it, so a second hg resume of the same run is refused instead of
// running the same nodes again beside the first. The kernel drops the
// lock when the process dies, so a killed run can be resumed at once.
const activeDir = "active"

// lockRun takes run's lock in the store at dir, or fails naming the
// process that holds it.
func lockRun(dir, run string) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Join(dir, activeDir), 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, activeDir, run)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	// The lock counts only on the file the path names now: a holder that
	// finished removed its file, perhaps after this one was opened.
	if err := tryLock(f); err != nil || !samePath(f, path) {
		holder, _ := os.ReadFile(path)
		f.Close()
		who := strings.TrimSpace(string(holder))
		if who == "" {
			who = "another process"
		}
		return nil, fmt.Errorf("run %s is being executed by %s: wait for it, or 'hg cancel %s'", run, who, run)
	}
	if err := f.Truncate(0); err == nil {
		fmt.Fprintf(f, "pid %d (%s) since %s\n", os.Getpid(), strings.Join(os.Args, " "), time.Now().UTC().Format(time.RFC3339))
	}
	return func() {
		os.Remove(path) // while still locked: a waiting process opens a fresh file
		f.Close()
	}, nil
}

// samePath reports whether path still names the open file f.
func samePath(f *os.File, path string) bool {
	a, err1 := f.Stat()
	b, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// runActive reports whether a process holds run's lock in the store at
// dir, that is, executes the run now.
func runActive(dir, run string) bool {
	f, err := os.OpenFile(filepath.Join(dir, activeDir, run), os.O_RDWR, 0)
	if err != nil {
		return false // no lock file: nobody has held it since it was removed
	}
	defer f.Close() // closing drops a lock taken here
	return tryLock(f) != nil
}

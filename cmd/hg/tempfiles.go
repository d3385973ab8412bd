package main

import (
	"os"
	"path/filepath"
	"strconv"

	"github.com/haygent/hg/cas"
)

// ownerFile is the file in a process's temporary directory on which the
// process holds a lock for as long as it lives.
const ownerFile = ".owner"

// hgMain is Main with a temporary directory of the process's own (see
// ownTemp): what the hg binary runs.
func hgMain() int {
	release := ownTemp()
	defer release()
	return Main()
}

// ownTemp gives this process a directory of its own in the system's
// temporary directory, hg-PID-RANDOM, holds a lock on its .owner file for
// as long as the process lives, and points TMPDIR at it, so that every
// temporary file and directory hg and the runtime make (a step's scratch
// copy, a workspace, an adapter's files, a resume's plan) lies inside it.
// First it removes every such directory whose owner is dead (a run killed
// with SIGKILL): no process has its pid and none holds its lock. The
// returned func removes the directory and puts TMPDIR back.
func ownTemp() (release func()) {
	base := os.TempDir()
	cas.SweepDead(base, "hg-", ownerFile)
	dir, err := os.MkdirTemp(base, "hg-"+strconv.Itoa(os.Getpid())+"-*")
	if err != nil {
		return func() {} // temporary files go where they always went
	}
	owner, err := os.OpenFile(filepath.Join(dir, ownerFile), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		os.Remove(dir)
		return func() {}
	}
	_ = tryLock(owner)
	old, had := os.LookupEnv("TMPDIR")
	os.Setenv("TMPDIR", dir)
	return func() {
		if had {
			os.Setenv("TMPDIR", old)
		} else {
			os.Unsetenv("TMPDIR")
		}
		owner.Close()
		cas.RemoveIfUnlocked(dir, filepath.Join(dir, ownerFile))
	}
}

package cas

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// TempPrefix begins the name of every temporary file or directory hg
// writes beside its final place (a file or tree being written out, a
// bundle being exported), before renaming it there. The full name is
// TempPrefix + the writer's pid + "-" + random characters, and the writer
// holds a lock on it (where the system has flock) for as long as it
// lives, so that the next writer in the same directory can tell a dead
// writer's leftovers from a live one's and remove them
// ([SweepDeadTemps]).
const TempPrefix = ".hg-get-"

// tempPattern is the os.CreateTemp pattern of this process's temporary
// names.
func tempPattern() string { return TempPrefix + strconv.Itoa(os.Getpid()) + "-*" }

// CreateOwnedTemp creates a temporary file in dir, named and locked as
// [TempPrefix] says. The lock goes with the file's last close.
func CreateOwnedTemp(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, tempPattern())
	if err != nil {
		return nil, err
	}
	_ = tryLock(f) // best effort: the pid in the name still tells
	return f, nil
}

// MkdirOwnedTemp creates a temporary directory in dir, named and locked
// as [TempPrefix] says; release drops the lock.
func MkdirOwnedTemp(dir string) (name string, release func(), err error) {
	name, err = os.MkdirTemp(dir, tempPattern())
	if err != nil {
		return "", nil, err
	}
	f, err := os.Open(name)
	if err != nil {
		return name, func() {}, nil
	}
	_ = tryLock(f)
	return name, func() { f.Close() }, nil
}

// SweepDeadTemps removes every entry of dir named as [TempPrefix] says
// whose writer is dead: no process has its pid, and no process holds its
// lock. A writer that cannot be shown dead keeps its file. Failures are
// ignored: sweeping is a courtesy to the disk, never a reason to fail.
func SweepDeadTemps(dir string) { SweepDead(dir, TempPrefix, "") }

// SweepDead removes every entry of dir named prefix + PID + "-" + more
// whose owner is dead: no process has the pid, and no process holds the
// lock on the entry or, if lockName is set, on the file of that name in
// it (an entry without that file is left alone: it may not be hg's).
func SweepDead(dir, prefix, lockName string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		pid, ok := ownerPid(strings.TrimPrefix(e.Name(), prefix))
		if !ok || pidAlive(pid) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		lock := path
		if lockName != "" {
			lock = filepath.Join(path, lockName)
		}
		RemoveIfUnlocked(path, lock)
	}
}

// ownerPid reads the pid at the start of "PID-rest".
func ownerPid(s string) (int, bool) {
	digits, _, ok := strings.Cut(s, "-")
	if !ok || digits == "" {
		return 0, false
	}
	pid, err := strconv.Atoi(digits)
	return pid, err == nil && pid > 0
}

// RemoveIfUnlocked removes path (a file, or a directory and everything in
// it) if no process holds the lock on lockPath, taking that lock first.
// It reports whether it removed it.
func RemoveIfUnlocked(path, lockPath string) bool {
	f, err := os.Open(lockPath)
	if err != nil {
		return false
	}
	defer f.Close()
	if tryLock(f) != nil {
		return false
	}
	return removeTree(path) == nil
}

// removeTree removes path and everything below it, making directories
// that forbid it (an overlay's work directory is left with mode 0)
// writable on the way.
func removeTree(path string) error {
	if err := os.RemoveAll(path); err == nil {
		return nil
	}
	_ = walkChmod(path)
	return os.RemoveAll(path)
}

// walkChmod makes every directory under path readable and writable by
// its owner.
func walkChmod(path string) error {
	info, err := os.Lstat(path)
	if err != nil || !info.IsDir() {
		return err
	}
	_ = os.Chmod(path, 0o700)
	ents, err := os.ReadDir(path)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() {
			_ = walkChmod(filepath.Join(path, e.Name()))
		}
	}
	return nil
}

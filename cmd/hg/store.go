package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/boltstore"
)

// storeDirName is the name of a store directory found by walking up from
// the working directory. (Not ".hg": that is Mercurial's.)
const storeDirName = cas.StoreDirName

var errNoStore = errors.New("no hg store found")

// lockTimeout is how long a command waits for a store another process
// holds. HG_LOCK_TIMEOUT (a Go duration; 0 waits as long as it takes)
// overrides it.
const lockTimeout = 3 * time.Second

// lockWait is how long a command waits for a store another process
// holds: lockTimeout, or HG_LOCK_TIMEOUT, where 0 means as long as it
// takes (boltstore.Forever). A value that is not a duration of zero or
// more is a usage error, never ignored.
func lockWait() (time.Duration, error) {
	s, ok := os.LookupEnv("HG_LOCK_TIMEOUT")
	if !ok || s == "" {
		return lockTimeout, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, usageError{fmt.Errorf("HG_LOCK_TIMEOUT=%q: want a duration such as 3s or 500ms, or 0 to wait as long as it takes", s)}
	}
	if d == 0 {
		return boltstore.Forever, nil
	}
	return d, nil
}

// openStoreWaiting opens the store as openStore does, but waits for other
// processes for as long as they hold it, until ctx is done: a run shares
// the store with other commands (a put of a big file, a gc) and must not
// die of them. Past the lock wait it says, now and then, what it waits
// for.
func (g *globals) openStoreWaiting(ctx context.Context, readOnly bool, command string) (cas.Store, error) {
	wait, err := lockWait()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	for {
		st, err := g.openStoreFor(readOnly, command, min(wait, time.Second))
		var busy *cas.BusyError
		if !errors.As(err, &busy) {
			return st, err
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, err
		}
		if time.Since(start) >= min(wait, lockTimeout) {
			g.noteWait(busy)
		}
	}
}

// waitNotes spaces out the notes of runs waiting for the store.
var waitNotes struct {
	sync.Mutex
	last time.Time
}

// noteWait says on stderr what the store is waited for, at most every
// half minute.
func (g *globals) noteWait(busy *cas.BusyError) {
	waitNotes.Lock()
	defer waitNotes.Unlock()
	if time.Since(waitNotes.last) < 30*time.Second {
		return
	}
	waitNotes.last = time.Now()
	g.ui.warnf("waiting for the store: %v", busy)
}

// locateStore finds the store directory: --store, else $HG_STORE, else the
// nearest .haygent/ from the working directory up.
//
// A directory given by --store or $HG_STORE that holds no store but a
// .haygent/ that is one names that store: `hg init DIR` makes DIR/.haygent,
// and `--store DIR` then finds it.
func locateStore(flag string) (string, error) {
	given := flag
	if given == "" {
		given = os.Getenv("HG_STORE")
	}
	if given != "" {
		if !isStoreDir(given) && isStoreDir(filepath.Join(given, storeDirName)) {
			return filepath.Join(given, storeDirName), nil
		}
		return given, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; {
		cand := filepath.Join(dir, storeDirName)
		if info, err := os.Stat(cand); err == nil && info.IsDir() {
			return cand, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w (no %s in %s or any parent)", errNoStore, storeDirName, wd)
		}
		dir = parent
	}
}

// isStoreDir reports whether dir holds a store's database.
func isStoreDir(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, "store.db")) // boltstore's database
	return err == nil && fi.Mode().IsRegular()
}

// openStore opens the store for a command. Commands that only read pass
// readOnly, so several of them can share the store.
func (g *globals) openStore(readOnly bool, command string) (cas.Store, error) {
	timeout, err := lockWait()
	if err != nil {
		return nil, err
	}
	return g.openStoreFor(readOnly, command, timeout)
}

// openStoreFor opens the store, waiting up to timeout for another process
// that holds it.
func (g *globals) openStoreFor(readOnly bool, command string, timeout time.Duration) (cas.Store, error) {
	dir, err := locateStore(g.store)
	if err != nil {
		return nil, err
	}
	st, err := boltstore.Open(dir, &boltstore.Options{ReadOnly: readOnly, Timeout: timeout, Command: command})
	if errors.Is(err, cas.ErrNotFound) {
		return nil, fmt.Errorf("%w at %s", errNoStore, dir)
	}
	return st, err
}

// commandLine describes the running command for the store's holder file.
func commandLine(args []string) string {
	s := strings.Join(append([]string{"hg"}, args...), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// withStore opens the store for one command, runs fn and closes the store,
// keeping fn's error first. Commands that only read pass readOnly, so
// several can share the store.
func (g *globals) withStore(readOnly bool, fn func(st cas.Store) error) (err error) {
	st, err := g.openStore(readOnly, commandLine(g.args))
	if err != nil {
		return err
	}
	defer closeStore(st, &err)
	return fn(st)
}

// outsideStore refuses an output path inside the store directory: writing
// a bundle or a file there could overwrite the store's own database or
// packs. Paths are compared after resolving symbolic links, as far as
// they exist.
func outsideStore(g *globals, path string) error {
	dir, err := locateStore(g.store)
	if err != nil {
		return nil // no store: the command reports that itself
	}
	real := func(p string) string {
		abs, err := filepath.Abs(p)
		if err != nil {
			return p
		}
		// Resolve the longest existing prefix, then put the rest back.
		rest := ""
		for cur := abs; ; {
			if r, err := filepath.EvalSymlinks(cur); err == nil {
				return filepath.Join(r, rest)
			}
			parent := filepath.Dir(cur)
			if parent == cur {
				return abs
			}
			rest = filepath.Join(filepath.Base(cur), rest)
			cur = parent
		}
	}
	store, out := real(dir), real(path)
	if rel, err := filepath.Rel(store, out); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return usageError{fmt.Errorf("-o %s is inside the store %s: hg does not write into its own store", path, dir)}
	}
	return nil
}

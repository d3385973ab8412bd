package workspace

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"sync"

	"github.com/haygent/hg/haygent/perm"
)

// Rules of this package that refuse an operation whatever the grants say.
// They appear in [perm.Denial.Rule] and [perm.DeniedError.Rule].
const (
	// RuleSymlink: the path goes through or ends at a symbolic link that
	// would have to be followed, or a change creates one. Symbolic links
	// are never followed and never created.
	RuleSymlink = "symlink"

	// RuleSpecial: a change creates a named pipe, socket or device.
	RuleSpecial = "special file"
)

// Workspace gives a step access to the files of one directory, each
// operation checked against a [perm.Set] and carried out through an
// [os.Root]. Make one with [Open]. Its methods are safe for concurrent
// use.
//
// Paths are workspace-relative and slash-separated, checked and cleaned
// by [perm.CleanPath]. An operation the set refuses, a path CleanPath
// refuses (absolute, "..", backslash, NUL) and a path that would follow a
// symbolic link are denied: the method returns a [*perm.DeniedError] and
// the denial is appended to [Workspace.Denials]. The os.Root keeps every
// operation inside the directory in any case. So is every operation on a
// path inside an hg store, whatever the set allows ([RuleStore]).
type Workspace struct {
	root  *os.Root
	set   *perm.Set
	fence *Fence

	mu      sync.Mutex
	denials []perm.Denial
}

// Open opens the directory dir as a workspace governed by set. Every
// directory named [StoreDirName] in it, and each of stores (paths of store
// directories, see [NewFence]) that lies inside it, is out of reach.
func Open(dir string, set *perm.Set, stores ...string) (*Workspace, error) {
	fence, err := NewFence(dir, stores...)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &Workspace{root: root, set: set, fence: fence}, nil
}

// Close releases the directory.
func (w *Workspace) Close() error { return w.root.Close() }

// Denials returns a copy of the denials so far, in the order they
// happened.
func (w *Workspace) Denials() []perm.Denial {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.denials)
}

func (w *Workspace) deny(op perm.Op, rule string) error {
	w.mu.Lock()
	w.denials = append(w.denials, perm.Denial{Op: op, Rule: rule})
	w.mu.Unlock()
	return &perm.DeniedError{Op: op, Rule: rule}
}

// check decides op and returns the cleaned path, or the denial as an
// error.
func (w *Workspace) check(verb, rel string) (string, perm.Op, error) {
	op := perm.Op{Verb: verb, Kind: perm.KindFile, Target: rel}
	if p, err := perm.CleanPath(rel); err == nil && w.fence.blocks(w.root, p) {
		return "", op, w.deny(op, RuleStore)
	}
	if d := w.set.Check(op); !d.Allowed {
		return "", op, w.deny(op, d.Rule)
	}
	p, _ := perm.CleanPath(rel) // Check refuses what CleanPath refuses
	return p, op, nil
}

// fsErr turns a symbolic link met on the way into a denial; other errors
// are returned as they are, in an [fs.PathError] naming rel.
func (w *Workspace) fsErr(op perm.Op, opName, rel string, err error) error {
	if errors.Is(err, errSymlink) {
		return w.deny(op, RuleSymlink)
	}
	if pe, ok := err.(*fs.PathError); ok {
		err = pe.Err
	}
	return &fs.PathError{Op: opName, Path: rel, Err: err}
}

// ReadFile returns the content of the regular file rel if read:file
// allows it. It never follows a symbolic link, whether as rel itself or as
// a directory on the way; that is denied with [RuleSymlink]. A directory or
// other non-regular file is an error, not a denial.
func (w *Workspace) ReadFile(rel string) ([]byte, error) {
	p, op, err := w.check(perm.VerbRead, rel)
	if err != nil {
		return nil, err
	}
	f, _, err := openFile(w.root, p)
	if err != nil {
		return nil, w.fsErr(op, "read", p, err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, w.fsErr(op, "read", p, err)
	}
	return data, nil
}

// Stat describes rel, without following a symbolic link (a link reports
// as a link), if read:file allows rel. A symbolic link among the
// directories on the way is denied with [RuleSymlink].
func (w *Workspace) Stat(rel string) (fs.FileInfo, error) {
	p, op, err := w.check(perm.VerbRead, rel)
	if err != nil {
		return nil, err
	}
	if p == "." {
		fi, err := w.root.Stat(".")
		if err != nil {
			return nil, w.fsErr(op, "stat", p, err)
		}
		return fi, nil
	}
	dir, name, err := openParent(w.root, p, false)
	if err != nil {
		return nil, w.fsErr(op, "stat", p, err)
	}
	defer dir.Close()
	fi, err := dir.Lstat(name)
	if err != nil {
		return nil, w.fsErr(op, "stat", p, err)
	}
	return fi, nil
}

// WriteFile writes data to the file rel with permission bits mode (other
// bits are an error) if write:file allows rel. The write is atomic: data
// goes to a temporary file in rel's directory, synced, then renamed over
// rel. Missing directories on the way are made (mode 0755); an existing
// symbolic link on the way is denied with [RuleSymlink], and a symbolic
// link at rel is replaced, not followed.
func (w *Workspace) WriteFile(rel string, data []byte, mode fs.FileMode) error {
	p, op, err := w.check(perm.VerbWrite, rel)
	if err != nil {
		return err
	}
	if mode&^fs.ModePerm != 0 {
		return &fs.PathError{Op: "write", Path: p, Err: errors.New("mode has bits other than the permission bits")}
	}
	if p == "." {
		return &fs.PathError{Op: "write", Path: p, Err: errors.New("is the workspace root")}
	}
	if _, err := writeAtomic(w.root, p, bytes.NewReader(data), mode, nil); err != nil {
		return w.fsErr(op, "write", p, err)
	}
	return nil
}

// Remove deletes the file (or symbolic link, not followed) rel if
// delete:file, which write:file entries decide, allows it. It does not
// remove directories.
func (w *Workspace) Remove(rel string) error {
	p, op, err := w.check(perm.VerbDelete, rel)
	if err != nil {
		return err
	}
	if p == "." {
		return &fs.PathError{Op: "remove", Path: p, Err: errors.New("is the workspace root")}
	}
	dir, name, err := openParent(w.root, p, false)
	if err != nil {
		return w.fsErr(op, "remove", p, err)
	}
	defer dir.Close()
	fi, err := dir.Lstat(name)
	if err != nil {
		return w.fsErr(op, "remove", p, err)
	}
	if fi.IsDir() {
		return &fs.PathError{Op: "remove", Path: p, Err: errors.New("is a directory")}
	}
	if err := dir.Remove(name); err != nil {
		return w.fsErr(op, "remove", p, err)
	}
	return nil
}

// List returns, sorted, the paths of the regular files beneath the
// directory dir ("." for all) that read:file allows. Files it may not read
// are left out silently, without a denial, and so is every hg store;
// symbolic links are neither listed nor followed. A dir that
// [perm.CleanPath] refuses, that goes through a symbolic link, or that is
// inside a store, is denied.
func (w *Workspace) List(dir string) ([]string, error) {
	op := perm.Op{Verb: perm.VerbRead, Kind: perm.KindFile, Target: dir}
	p, err := perm.CleanPath(dir)
	if err != nil {
		return nil, w.deny(op, w.set.Check(op).Rule)
	}
	if w.fence.blocks(w.root, p) {
		return nil, w.deny(op, RuleStore)
	}
	var out []string
	descend := func(rel string) bool {
		if !w.set.MayMatchUnder(perm.VerbRead, rel) || w.fence.Holds(rel) {
			return false
		}
		fi, err := w.root.Lstat(rel)
		return err != nil || !w.fence.IsStore(fi)
	}
	err = walk(w.root, p, descend, func(e entry) error {
		if e.mode.IsRegular() && !w.fence.Holds(e.rel) && w.set.Check(perm.Op{Verb: perm.VerbRead, Kind: perm.KindFile, Target: e.rel}).Allowed {
			out = append(out, e.rel)
		}
		return nil
	})
	if err != nil {
		return nil, w.fsErr(op, "list", p, err)
	}
	slices.Sort(out)
	return out, nil
}

package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/haygent/hg/haygent/perm"
)

// ErrConflict is returned by [Apply] when the real workspace no longer
// holds what the scratch copy started from. [*ConflictError] wraps it.
var ErrConflict = errors.New("workspace changed since the scratch copy")

// ConflictError reports one change [Apply] refused to make because the
// file in the real workspace is not what the change expects.
type ConflictError struct {
	Change Change
	Reason string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("workspace: %s %s: %s", e.Change.Kind, e.Change.Path, e.Reason)
}

// Unwrap returns [ErrConflict].
func (e *ConflictError) Unwrap() error { return ErrConflict }

// Apply copies into the real workspace dst the changes that set allows,
// from the scratch directory they were found in, and returns those it
// made and the denials of the others, which it leaves unmade.
//
// Create and Modify need write:file on the path; Delete needs
// delete:file, which write:file entries decide. A Symlink change is always
// denied ([RuleSymlink]) and so is a Special one ([RuleSpecial]): Apply
// never creates a symbolic link, pipe, socket or device. A path that
// would go through a symbolic link in dst is denied with RuleSymlink.
// Denials carry the operation write:file:PATH (delete:file:PATH for a
// Delete) and the rule that decided.
//
// A change of any kind to a path inside an hg store is always denied
// ([RuleStore]), whatever set allows: a path with a segment named
// [StoreDirName], or inside one of stores (paths of store directories,
// see [NewFence]) that lies in dst, by its name or because a directory on
// its way in dst is that store.
//
// Before it changes anything, Apply checks every allowed change against
// dst: a Modify or Delete needs the file there to have the Before digest
// (a Delete of a file already gone is done), and a Create needs nothing or
// a regular file there, which it replaces (the step may have been unable
// to read it) or a directory whose files are all being deleted. Any
// mismatch is a [*ConflictError] (errors.Join'ed, all of
// them) and nothing is applied. A change that makes no sense (a Create
// without After, a path twice) is an error, also before anything is done.
//
// Deletions go first; a directory of dst that a deletion leaves empty and
// that no longer exists in scratch is removed too. Then each Create and
// Modify is written atomically: the content is read from scratch without
// following symbolic links, checked against After's digest, written to a
// temporary file beside its destination, synced, given After's permission
// bits, and renamed into place; directories are made as needed (0755). An
// error stops Apply and is returned with the changes made so far. A change
// made to dst between the check and the write is not detected.
func Apply(changes Changes, scratch string, dst string, set *perm.Set, stores ...string) (applied []Change, denied []perm.Denial, err error) {
	if err := validate(changes); err != nil {
		return nil, nil, err
	}
	fence, err := NewFence(dst, stores...)
	if err != nil {
		return nil, nil, err
	}
	out, err := os.OpenRoot(dst)
	if err != nil {
		return nil, nil, err
	}
	defer out.Close()
	var allowed []Change
	for _, c := range changes {
		op := perm.Op{Verb: perm.VerbWrite, Kind: perm.KindFile, Target: c.Path}
		if c.Kind == Delete {
			op.Verb = perm.VerbDelete
		}
		if p, err := perm.CleanPath(c.Path); err == nil && fence.blocks(out, p) {
			denied = append(denied, perm.Denial{Op: op, Rule: RuleStore})
			continue
		}
		switch c.Kind {
		case Symlink:
			denied = append(denied, perm.Denial{Op: op, Rule: RuleSymlink})
			continue
		case Special:
			denied = append(denied, perm.Denial{Op: op, Rule: RuleSpecial})
			continue
		}
		if d := set.Check(op); !d.Allowed {
			denied = append(denied, perm.Denial{Op: op, Rule: d.Rule})
			continue
		}
		c.Path, _ = perm.CleanPath(c.Path)
		allowed = append(allowed, c)
	}

	src, err := os.OpenRoot(scratch)
	if err != nil {
		return nil, denied, err
	}
	defer src.Close()

	// Check every allowed change against dst before making any.
	deleting := map[string]bool{}
	for _, c := range allowed {
		if c.Kind == Delete {
			deleting[c.Path] = true
		}
	}
	var conflicts []error
	ready := allowed[:0]
	for _, c := range allowed {
		why, err := conflict(out, c, deleting)
		switch {
		case errors.Is(err, errSymlink):
			verb := perm.VerbWrite
			if c.Kind == Delete {
				verb = perm.VerbDelete
			}
			denied = append(denied, perm.Denial{Op: perm.Op{Verb: verb, Kind: perm.KindFile, Target: c.Path}, Rule: RuleSymlink})
		case err != nil:
			return nil, denied, fmt.Errorf("workspace: apply: %s: %w", c.Path, err)
		case why != "":
			conflicts = append(conflicts, &ConflictError{Change: c, Reason: why})
		default:
			ready = append(ready, c)
		}
	}
	if len(conflicts) > 0 {
		return nil, denied, errors.Join(conflicts...)
	}

	// Deletions first, so that a file may take the place of a directory
	// they empty.
	slices.SortStableFunc(ready, func(a, b Change) int {
		if (a.Kind == Delete) != (b.Kind == Delete) {
			if a.Kind == Delete {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Path, b.Path)
	})
	for _, c := range ready {
		if c.Kind == Delete {
			if err := remove(out, src, c.Path); err != nil {
				return applied, denied, fmt.Errorf("workspace: apply: delete %s: %w", c.Path, err)
			}
			applied = append(applied, c)
			continue
		}
		if err := copyBack(src, out, c); err != nil {
			return applied, denied, fmt.Errorf("workspace: apply: %s %s: %w", c.Kind, c.Path, err)
		}
		applied = append(applied, c)
	}
	return applied, denied, nil
}

// validate refuses a list of changes Diff cannot have made.
func validate(changes Changes) error {
	seen := map[string]bool{}
	for _, c := range changes {
		p, err := perm.CleanPath(c.Path)
		if err != nil {
			p = c.Path // Apply denies it
		}
		bad := ""
		switch c.Kind {
		case Create:
			if c.After == nil {
				bad = "no After"
			}
		case Modify:
			if c.Before == nil || c.After == nil {
				bad = "no Before or After"
			}
		case Delete:
			if c.Before == nil {
				bad = "no Before"
			}
		case Symlink, Special:
		default:
			bad = "unknown kind"
		}
		if seen[p] {
			bad = "path appears twice"
		}
		seen[p] = true
		if bad != "" {
			return fmt.Errorf("workspace: apply: change %q %s: %s", c.Kind, c.Path, bad)
		}
	}
	return nil
}

// conflict returns why c cannot be made in root as things stand, or "".
// deleting holds the paths of the Deletes about to be made, which may
// clear the way for a Create.
func conflict(root *os.Root, c Change, deleting map[string]bool) (string, error) {
	dir, name, err := openParent(root, c.Path, false)
	if errors.Is(err, fs.ErrNotExist) {
		if c.Kind == Modify {
			return "the file is gone", nil
		}
		return "", nil
	}
	if errors.Is(err, errNotDir) {
		if c.Kind == Create {
			for d := path.Dir(c.Path); d != "."; d = path.Dir(d) {
				if deleting[d] {
					return "", nil
				}
			}
		}
		if c.Kind == Delete {
			return "", nil // gone: its directory is a file now
		}
		return "a file is in the way of its directory", nil
	}
	if err != nil {
		return "", err
	}
	defer dir.Close()
	fi, err := dir.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		if c.Kind == Modify {
			return "the file is gone", nil
		}
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if fi.IsDir() && c.Kind == Create {
		ok, err := emptiedBy(dir, name, c.Path, deleting)
		if err != nil || ok {
			return "", err
		}
	}
	if !fi.Mode().IsRegular() {
		return fmt.Sprintf("a %s is in the way", kindName(fi.Mode())), nil
	}
	if c.Kind == Create {
		return "", nil
	}
	f, st, err := openRegular(dir, name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	cur, err := hashOpen(f, st.Mode().Perm())
	if err != nil {
		return "", err
	}
	if cur.Digest != c.Before.Digest {
		return fmt.Sprintf("sha256 is %s, not %s", cur.Digest, c.Before.Digest), nil
	}
	return "", nil
}

// emptiedBy reports whether every file beneath the directory name in dir
// (whose path is rel) is in deleting, so that the deletions will empty it
// and remove it.
func emptiedBy(dir *os.Root, name, rel string, deleting map[string]bool) (bool, error) {
	sub, err := openSubdir(dir, name, false)
	if err != nil {
		return false, err
	}
	defer sub.Close()
	all := true
	err = walk(sub, ".", nil, func(e entry) error {
		all = all && e.mode.IsRegular() && deleting[rel+"/"+e.rel]
		return nil
	})
	return all, err
}

func kindName(m fs.FileMode) string {
	if m.IsDir() {
		return "directory"
	}
	return describe(m)
}

// remove deletes the file rel in root, if still there, then each
// directory above it that is left empty and is not a directory in
// scratch.
func remove(root, scratch *os.Root, rel string) error {
	dir, name, err := openParent(root, rel, false)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotDir) {
		return nil
	}
	if err != nil {
		return err
	}
	err = dir.Remove(name)
	dir.Close()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		if sd, err := openDir(scratch, d, false); err == nil {
			sd.Close()
			return nil
		}
		parent, name, err := openParent(root, d, false)
		if err != nil {
			return nil
		}
		fi, err := parent.Lstat(name)
		if err == nil && fi.IsDir() {
			err = parent.Remove(name) // fails, as it should, unless empty
		}
		parent.Close()
		if err != nil {
			return nil
		}
	}
	return nil
}

// copyBack writes the file c.Path of scratch into root atomically,
// checking its content against c.After.
func copyBack(scratch, root *os.Root, c Change) error {
	f, _, err := openFile(scratch, c.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = writeAtomic(root, c.Path, f, c.After.Mode.Perm(), func(got FileState) error {
		if got.Digest != c.After.Digest || got.Size != c.After.Size {
			return fmt.Errorf("the scratch file changed after Diff: sha256 %s, want %s", got.Digest, c.After.Digest)
		}
		return nil
	})
	return err
}

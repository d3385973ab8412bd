package workspace

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
)

// errSymlink is returned for a path that goes through, or ends at, a
// symbolic link where a file or directory was wanted, and for a path
// whose file changed between the check of its type and the open.
var errSymlink = errors.New("path goes through a symbolic link")

// errNotRegular is returned for a path that is not a regular file.
var errNotRegular = errors.New("not a regular file")

// errNotDir is returned for a directory on a path that is something else.
var errNotDir = errors.New("not a directory")

// dirMode is the mode of directories made to hold a file.
const dirMode fs.FileMode = 0o755

// tmpPrefix starts the name of the temporary file of an atomic write.
const tmpPrefix = ".hg-tmp-"

// openSubdir opens the directory name (one segment) in dir, without
// following a symbolic link. With create, a missing directory is made.
// The directory opened is checked to be the one that was looked at, so a
// swap for a symbolic link in between is caught.
func openSubdir(dir *os.Root, name string, create bool) (*os.Root, error) {
	fi, err := dir.Lstat(name)
	if create && errors.Is(err, fs.ErrNotExist) {
		if err = dir.Mkdir(name, dirMode); err == nil || errors.Is(err, fs.ErrExist) {
			fi, err = dir.Lstat(name)
		}
	}
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, errSymlink
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s: %w", name, errNotDir)
	}
	sub, err := dir.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	st, err := sub.Stat(".")
	if err != nil || !os.SameFile(fi, st) {
		sub.Close()
		if err == nil {
			err = errSymlink
		}
		return nil, err
	}
	return sub, nil
}

// openDir opens the directory rel (cleaned; "." for root itself) beneath
// root without following any symbolic link. The caller closes it.
func openDir(root *os.Root, rel string, create bool) (*os.Root, error) {
	cur, err := root.OpenRoot(".")
	if err != nil {
		return nil, err
	}
	if rel == "." {
		return cur, nil
	}
	for seg := range strings.SplitSeq(rel, "/") {
		next, err := openSubdir(cur, seg, create)
		cur.Close()
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return cur, nil
}

// openParent opens the directory that holds rel (cleaned, not ".") and
// returns it with rel's last segment.
func openParent(root *os.Root, rel string, create bool) (*os.Root, string, error) {
	dir, err := openDir(root, path.Dir(rel), create)
	if err != nil {
		return nil, "", err
	}
	return dir, path.Base(rel), nil
}

// openRegular opens the regular file name (one segment) in dir for
// reading, without following a symbolic link, and checks that the file
// opened is the one looked at.
func openRegular(dir *os.Root, name string) (*os.File, fs.FileInfo, error) {
	fi, err := dir.Lstat(name)
	if err != nil {
		return nil, nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, nil, errSymlink
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, errNotRegular
	}
	f, err := dir.OpenFile(name, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || !os.SameFile(fi, st) {
		f.Close()
		if err == nil {
			err = errSymlink
		}
		return nil, nil, err
	}
	return f, st, nil
}

// openFile is openRegular for a cleaned path beneath root.
func openFile(root *os.Root, rel string) (*os.File, fs.FileInfo, error) {
	dir, name, err := openParent(root, rel, false)
	if err != nil {
		return nil, nil, err
	}
	defer dir.Close()
	return openRegular(dir, name)
}

// hashFile returns the state of the regular file rel beneath root.
func hashFile(root *os.Root, rel string) (FileState, error) {
	f, st, err := openFile(root, rel)
	if err != nil {
		return FileState{}, err
	}
	defer f.Close()
	return hashOpen(f, st.Mode().Perm())
}

// hashOpen reads f to the end and returns its state with mode.
func hashOpen(f *os.File, mode fs.FileMode) (FileState, error) {
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return FileState{}, err
	}
	return FileState{Digest: hex.EncodeToString(h.Sum(nil)), Size: n, Mode: mode}, nil
}

// writeAtomic writes what r yields to the file rel beneath root: into a
// temporary file in rel's directory (made if missing), synced and given
// mode, then renamed over rel. It returns the state of what was written;
// if check is not nil and refuses that state, rel is left alone.
func writeAtomic(root *os.Root, rel string, r io.Reader, mode fs.FileMode, check func(FileState) error) (FileState, error) {
	dir, name, err := openParent(root, rel, true)
	if err != nil {
		return FileState{}, err
	}
	defer dir.Close()
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := tmpPrefix + hex.EncodeToString(rnd[:])
	f, err := dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return FileState{}, err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			dir.Remove(tmp)
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), r)
	if err != nil {
		return FileState{}, err
	}
	st := FileState{Digest: hex.EncodeToString(h.Sum(nil)), Size: n, Mode: mode.Perm()}
	if check != nil {
		if err := check(st); err != nil {
			return FileState{}, err
		}
	}
	if err := f.Chmod(mode.Perm()); err != nil {
		return FileState{}, err
	}
	if err := f.Sync(); err != nil {
		return FileState{}, err
	}
	if err := f.Close(); err != nil {
		return FileState{}, err
	}
	if err := dir.Rename(tmp, name); err != nil {
		return FileState{}, err
	}
	ok = true
	return st, nil
}

// entry is one thing walk found.
type entry struct {
	rel  string      // cleaned path beneath the walk's root
	dir  *os.Root    // the directory holding it, valid during the call
	name string      // its last segment
	mode fs.FileMode // its type bits, as Lstat reports them
}

// walk calls fn, directory by directory and in order of names within each,
// for every entry beneath root/start but the directories, never following a symbolic link. It enters a
// directory only if descend (nil: always) says so. An error from fn stops
// the walk.
func walk(root *os.Root, start string, descend func(rel string) bool, fn func(e entry) error) error {
	dir, err := openDir(root, start, false)
	if err != nil {
		return err
	}
	defer dir.Close()
	return walkDir(dir, start, descend, fn)
}

func walkDir(dir *os.Root, rel string, descend func(string) bool, fn func(entry) error) error {
	f, err := dir.Open(".")
	if err != nil {
		return err
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return err
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, d := range ents {
		child := path.Join(rel, d.Name())
		if d.IsDir() {
			if descend != nil && !descend(child) {
				continue
			}
			sub, err := openSubdir(dir, d.Name(), false)
			if err != nil {
				return fmt.Errorf("%s: %w", child, err)
			}
			err = walkDir(sub, child, descend, fn)
			sub.Close()
			if err != nil {
				return err
			}
			continue
		}
		if err := fn(entry{rel: child, dir: dir, name: d.Name(), mode: d.Type()}); err != nil {
			return err
		}
	}
	return nil
}

// describe names a non-regular, non-directory file type.
func describe(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "irregular file"
}

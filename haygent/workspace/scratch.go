package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/haygent/hg/haygent/perm"
)

// FileState is the content and permission bits of one regular file.
type FileState struct {
	Digest string      `json:"digest"` // sha256 of the content, lower-case hex
	Size   int64       `json:"size"`
	Mode   fs.FileMode `json:"mode"` // permission bits only (fs.ModePerm)
}

// Manifest records what [Scratch] copied.
type Manifest struct {
	// Files maps the path of every regular file copied to its state.
	Files map[string]FileState `json:"files"`

	// Skipped maps the path of every readable entry that was not copied
	// to the reason: "symlink", "named pipe", "socket", "device" or
	// "irregular file". Paths the read grants refuse are not recorded,
	// so the manifest names no file the Haygent may not read.
	Skipped map[string]string `json:"skipped,omitempty"`
}

// Scratch copies into dst the regular files beneath src that set allows
// to read (read:file, minus deny entries), with the directories that hold
// them, and returns what it copied.
//
// dst must be an empty directory or not exist (it is then made, mode
// 0700, in an existing parent). Files keep their permission bits and lose
// the rest (setuid, setgid, sticky); directories are made with mode 0755.
// Nothing outside src is ever read: symbolic links are neither followed
// nor copied, only recorded in [Manifest.Skipped] when their path is
// readable, and so are named pipes, sockets and devices. Directories that
// no read grant could reach into are not entered, nor dst itself should it
// lie inside src.
//
// No hg store is copied, whatever set allows: no directory named
// [StoreDirName] at any depth, and none of stores (paths of store
// directories, see [NewFence]) that lies inside src. They are not
// recorded in the manifest either.
func Scratch(src string, set *perm.Set, dst string, stores ...string) (*Manifest, error) {
	fence, err := NewFence(src, stores...)
	if err != nil {
		return nil, err
	}
	if err := os.Mkdir(dst, 0o700); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		ents, err := os.ReadDir(dst)
		if err != nil {
			return nil, err
		}
		if len(ents) != 0 {
			return nil, fmt.Errorf("workspace: scratch directory %s is not empty", dst)
		}
	}
	srcRoot, err := os.OpenRoot(src)
	if err != nil {
		return nil, err
	}
	defer srcRoot.Close()
	dstRoot, err := os.OpenRoot(dst)
	if err != nil {
		return nil, err
	}
	defer dstRoot.Close()

	m := &Manifest{Files: map[string]FileState{}}
	self, err := dstRoot.Stat(".")
	if err != nil {
		return nil, err
	}
	descend := func(rel string) bool {
		if !set.MayMatchUnder(perm.VerbRead, rel) || fence.Holds(rel) {
			return false
		}
		// Never copy the scratch directory into itself, nor a store
		// reached by another name.
		fi, err := srcRoot.Lstat(rel)
		return err != nil || !os.SameFile(fi, self) && !fence.IsStore(fi)
	}
	err = walk(srcRoot, ".", descend, func(e entry) error {
		if fence.Holds(e.rel) || !set.Check(perm.Op{Verb: perm.VerbRead, Kind: perm.KindFile, Target: e.rel}).Allowed {
			return nil
		}
		if !e.mode.IsRegular() {
			if m.Skipped == nil {
				m.Skipped = map[string]string{}
			}
			m.Skipped[e.rel] = describe(e.mode)
			return nil
		}
		f, st, err := openRegular(e.dir, e.name)
		if errors.Is(err, errSymlink) || errors.Is(err, errNotRegular) {
			// Swapped since the directory was read: skip, never follow.
			if m.Skipped == nil {
				m.Skipped = map[string]string{}
			}
			m.Skipped[e.rel] = "changed while copying"
			return nil
		}
		if err != nil {
			return fmt.Errorf("workspace: scratch: %s: %w", e.rel, err)
		}
		defer f.Close()
		state, err := writeNew(dstRoot, e.rel, f, st.Mode().Perm())
		if err != nil {
			return fmt.Errorf("workspace: scratch: %s: %w", e.rel, err)
		}
		m.Files[e.rel] = state
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// writeNew copies r into the new file rel beneath root (its directories
// made if missing), with permission bits mode, and returns what it wrote.
// Unlike writeAtomic it neither syncs nor renames: the scratch directory is
// private and disposable.
func writeNew(root *os.Root, rel string, r io.Reader, mode fs.FileMode) (FileState, error) {
	dir, name, err := openParent(root, rel, true)
	if err != nil {
		return FileState{}, err
	}
	defer dir.Close()
	f, err := dir.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return FileState{}, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), r)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return FileState{}, err
	}
	return FileState{Digest: hex.EncodeToString(h.Sum(nil)), Size: n, Mode: mode}, nil
}

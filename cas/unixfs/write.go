package unixfs

import (
	"context"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// WriteOptions tune [WriteTree]. A nil *WriteOptions means the defaults.
type WriteOptions struct {
	// Progress, if set, is called with the file content bytes done so far.
	Progress func(done int64)
	// MaxEntries bounds the files, directories and symlinks written; 0
	// is DefaultMaxEntries. A small DAG can name a directory under many
	// paths (each level linking the one below twice): what it expands to
	// is counted as it is written, and refused past the bound.
	MaxEntries int64
}

// DefaultMaxEntries is [WriteOptions].MaxEntries when it is 0.
const DefaultMaxEntries = 1 << 22

// maxPath bounds the length of a path written below dst: Linux's
// PATH_MAX, which directories nested within [MaxDirDepth] could exceed
// with long names (and cost memory at every level).
const maxPath = 4096

// WriteTree writes the UnixFS directory c into dst, which must not exist
// or be an empty directory, as [cas.GetTree] writes an hg tree: into a
// temporary directory beside dst, renamed over it only when everything is
// written, so that an error (a missing or damaged block, a bad name, a
// size that does not add up) leaves nothing at dst. A dst that is a
// symlink is followed. Files are written 0644 and directories 0755: the
// mode and mtime a node may carry are not applied.
//
// A symlink is written only if its target stays inside dst however the
// links below dst resolve: a relative path whose ".." elements all come
// first and climb no higher than dst (SafeSymlinkTarget). Any other target
// is refused with an error naming the link, and nothing is written.
func WriteTree(ctx context.Context, st cas.BlockReader, c cid.Cid, dst string, opts *WriteOptions) error {
	if opts == nil {
		opts = &WriteOptions{}
	}
	root, err := Load(ctx, st, c)
	if err != nil {
		return err
	}
	if !root.IsDir() {
		return fmt.Errorf("%s is a UnixFS %s, not a directory: %w", c, root.Type(), cas.ErrInvalid)
	}
	return cas.WriteDir(dst, func(r *os.Root) error {
		w := treeWriter{ctx: ctx, st: st, root: r, opts: opts}
		if err := w.dir(root, ".", 0); err != nil {
			return err
		}
		return w.finish()
	})
}

type treeWriter struct {
	ctx      context.Context
	st       cas.BlockReader
	root     *os.Root
	opts     *WriteOptions
	done     int64
	entries  int64
	symlinks []symlink
}

type symlink struct{ target, path string }

func (w *treeWriter) dir(n *Node, rel string, depth int) error {
	if depth >= MaxDirDepth {
		return fmt.Errorf("%s: directories nested deeper than %d: %w", rel, MaxDirDepth, cas.ErrInvalid)
	}
	ents, err := Entries(w.ctx, w.st, n)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		p := path.Join(rel, e.Name)
		if err := cas.CheckStoreName(e.Name); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if len(p) > maxPath {
			return fmt.Errorf("%s...: a path of %d bytes, over %d: %w", p[:64], len(p), maxPath, cas.ErrInvalid)
		}
		max := w.opts.MaxEntries
		if max <= 0 {
			max = DefaultMaxEntries
		}
		if w.entries++; w.entries > max {
			return fmt.Errorf("the directory holds more than %d entries (files, directories and symlinks, counted along every path): %w", max, cas.ErrInvalid)
		}
		child, err := Load(w.ctx, w.st, e.CID)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		switch {
		case child.IsDir():
			if err := w.root.Mkdir(p, 0o755); err != nil {
				return err
			}
			if err := w.dir(child, p, depth+1); err != nil {
				return err
			}
		case child.IsFile():
			if err := w.file(child, p); err != nil {
				return err
			}
		case child.Type() == TypeSymlink:
			target := string(child.FS.Data)
			if err := SafeSymlinkTarget(p, target); err != nil {
				return err
			}
			w.symlinks = append(w.symlinks, symlink{target, p})
		default:
			return fmt.Errorf("%s: a UnixFS %s: %w", p, child.Type(), ErrUnsupported)
		}
	}
	return nil
}

func (w *treeWriter) file(n *Node, p string) error {
	f, err := w.root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	base := w.done
	var progress func(int64)
	if w.opts.Progress != nil {
		progress = func(k int64) { w.opts.Progress(base + k) }
	}
	r := fileReader{ctx: w.ctx, st: w.st, w: f, progress: progress}
	err = r.copy(n)
	w.done += r.done
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	return nil
}

// finish creates the symlinks once every file and directory is in place.
func (w *treeWriter) finish() error {
	for _, l := range w.symlinks {
		if err := w.root.Symlink(l.target, l.path); err != nil {
			return err
		}
	}
	return nil
}

// SafeSymlinkTarget returns nil if a symlink at rel (a slash-separated
// path below the root of a tree being written) with the given target
// resolves inside that root, whatever the other links in the tree point
// to: the target is relative, not empty, holds no NUL, and its ".."
// elements all come before any other element and number fewer than rel's
// directories. (A ".." after another element could climb out through a
// link: "a/.." where a points to "." leaves the root.) Otherwise the
// error names the link and its target and wraps [cas.ErrInvalid].
func SafeSymlinkTarget(rel, target string) error {
	bad := func(why string) error {
		return fmt.Errorf("symlink %s -> %q %s: hg writes only symlinks that stay inside the tree: %w", rel, target, why, cas.ErrInvalid)
	}
	switch {
	case target == "":
		return bad("has an empty target")
	case strings.IndexByte(target, 0) >= 0:
		return bad("holds a NUL")
	case strings.HasPrefix(target, "/"):
		return bad("is absolute")
	}
	up, down := 0, false
	for _, el := range strings.Split(target, "/") {
		switch el {
		case "", ".":
		case "..":
			if down {
				return bad("climbs with .. after descending")
			}
			up++
		default:
			down = true
		}
	}
	if depth := strings.Count(path.Clean(rel), "/"); up > depth {
		return bad("leaves the tree")
	}
	return nil
}

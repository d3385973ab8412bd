package cas

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ipfs/go-cid"
)

// Kinds of tree entries.
const (
	KindFile    = "file"
	KindDir     = "dir"
	KindSymlink = "symlink"
)

// TreeNode is a directory (hg/tree@1): its entries sorted by the bytes of
// their names, each name a single path element.
type TreeNode struct {
	Type    string      `cbor:"type"`
	Entries []TreeEntry `cbor:"entries"`
}

// TreeEntry is one name in a directory. Link is an hg/file@1 root for a
// file, an hg/tree@1 for a directory and a raw block holding the target
// for a symlink. Size is the file's length, the sum of the file sizes
// below a directory, or the length of a symlink's target. Mode holds only
// permission bits.
type TreeEntry struct {
	Name string `cbor:"name"`
	Kind string `cbor:"kind"`
	Mode uint32 `cbor:"mode"`
	Size uint64 `cbor:"size"`
	Link Link   `cbor:"link"`
}

// CheckName returns an error wrapping [ErrInvalid] unless name is a
// single, safe path element: not empty, not "." or "..", no "/", "\" or
// NUL, valid UTF-8.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty entry name: %w", ErrInvalid)
	case name == "." || name == "..":
		return fmt.Errorf("entry name %q: %w", name, ErrInvalid)
	case strings.ContainsAny(name, "/\\\x00"):
		return fmt.Errorf("entry name %q holds a separator or NUL: %w", name, ErrInvalid)
	case !utf8.ValidString(name):
		return fmt.Errorf("entry name %q is not valid UTF-8: %w", name, ErrInvalid)
	}
	return nil
}

// StoreDirName is the name of the directory an hg store lives in, which
// hg looks for above the working directory.
const StoreDirName = ".haygent"

// CheckStoreName returns an error wrapping [ErrInvalid] if name is
// [StoreDirName] in any case: a tree written out with such an entry would
// plant a store (its keys, its trust list) that hg, run below it, would
// find and use as its own. Writers of trees refuse it, as git refuses a
// ".git" entry.
func CheckStoreName(name string) error {
	if strings.EqualFold(name, StoreDirName) {
		return fmt.Errorf("entry %q is a store's directory name: hg does not write one out, since it would be taken for the store: %w", name, ErrInvalid)
	}
	return nil
}

// Check validates a tree node: its type, every entry's name, kind, mode
// and link codec, and the strict order of names (which also rules out
// duplicates).
func (t *TreeNode) Check() error {
	if t.Type != TypeTree {
		return fmt.Errorf("type %q, want %q: %w", t.Type, TypeTree, ErrInvalid)
	}
	for i, e := range t.Entries {
		if err := CheckName(e.Name); err != nil {
			return err
		}
		if i > 0 && t.Entries[i-1].Name >= e.Name {
			return fmt.Errorf("entries %q and %q are out of order or repeated: %w", t.Entries[i-1].Name, e.Name, ErrInvalid)
		}
		if e.Mode&^0o777 != 0 {
			return fmt.Errorf("entry %q: mode %o has bits beyond 0777: %w", e.Name, e.Mode, ErrInvalid)
		}
		want := uint64(DagCBOR)
		switch e.Kind {
		case KindFile, KindDir:
		case KindSymlink:
			want = Raw
		default:
			return fmt.Errorf("entry %q: unknown kind %q: %w", e.Name, e.Kind, ErrInvalid)
		}
		if !e.Link.Defined() || e.Link.Type() != want {
			return fmt.Errorf("entry %q: link of the wrong codec for a %s: %w", e.Name, e.Kind, ErrInvalid)
		}
	}
	return nil
}

// DecodeTree strictly decodes and checks an hg/tree@1 block.
func DecodeTree(data []byte) (*TreeNode, error) {
	var t TreeNode
	if err := Unmarshal(data, &t); err != nil {
		return nil, err
	}
	if err := t.Check(); err != nil {
		return nil, err
	}
	return &t, nil
}

// LoadTree reads, verifies and decodes the tree node c.
func LoadTree(ctx context.Context, st BlockReader, c cid.Cid) (*TreeNode, error) {
	if c.Type() != DagCBOR {
		return nil, fmt.Errorf("%s is not a tree: codec 0x%x: %w", c, c.Type(), ErrInvalid)
	}
	var t *TreeNode
	err := st.View(ctx, c, func(data []byte) error {
		var err error
		t, err = DecodeTree(data)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", c, err)
	}
	return t, nil
}

// TreeOptions tune [PutTree] and [GetTree]. A nil *TreeOptions means the
// defaults.
type TreeOptions struct {
	// Progress, if set, is called with the file content bytes done so far.
	Progress func(done int64)
	// Skipped, if set, is told of each entry PutTree leaves out (sockets,
	// devices, named pipes). Without it such an entry is an error.
	Skipped func(path string, mode fs.FileMode)
	// Include, if set, decides which entries PutTree stores, by their
	// slash-separated path below the root; an excluded directory is not
	// entered. Without it, everything is stored.
	Include func(path string, isDir bool) bool
}

// PutTree stores the directory dir and everything below it: files as
// hg/file@1, directories as hg/tree@1, symlinks as their target, never
// followed. All blocks go through one [Writer], so a tree of many small
// files costs few transactions. It returns the root tree CID.
func PutTree(ctx context.Context, st BlockWriter, dir string, opts *TreeOptions) (cid.Cid, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return cid.Undef, err
	}
	defer root.Close()
	return PutTreeRoot(ctx, st, root, opts)
}

// PutTreeRoot is [PutTree] of the directory root opens: every entry is
// read through it, so nothing outside it is read, whatever is renamed or
// swapped for a symlink meanwhile.
func PutTreeRoot(ctx context.Context, st BlockWriter, root *os.Root, opts *TreeOptions) (cid.Cid, error) {
	if opts == nil {
		opts = &TreeOptions{}
	}
	p := treePutter{ctx: ctx, root: root, w: NewWriter(st), opts: opts}
	c, _, err := p.dir(".")
	if err != nil {
		return cid.Undef, err
	}
	if err := p.w.Flush(ctx); err != nil {
		return cid.Undef, err
	}
	return c, nil
}

type treePutter struct {
	ctx  context.Context
	root *os.Root
	w    *Writer
	opts *TreeOptions
	done int64
}

func (p *treePutter) dir(rel string) (cid.Cid, uint64, error) {
	f, err := p.root.Open(rel)
	if err != nil {
		return cid.Undef, 0, err
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return cid.Undef, 0, err
	}
	// Entries go in the byte order of their names, which Check demands.
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	node := TreeNode{Type: TypeTree, Entries: make([]TreeEntry, 0, len(ents))}
	var total uint64
	for _, de := range ents {
		if err := p.ctx.Err(); err != nil {
			return cid.Undef, 0, err
		}
		name := de.Name()
		child := path.Join(rel, name)
		if err := CheckName(name); err != nil {
			return cid.Undef, 0, fmt.Errorf("%s: %w", child, err)
		}
		if p.opts.Include != nil && !p.opts.Include(child, de.IsDir()) {
			continue
		}
		info, err := p.root.Lstat(child)
		if err != nil {
			return cid.Undef, 0, err
		}
		e := TreeEntry{Name: name, Mode: uint32(info.Mode().Perm())}
		switch m := info.Mode(); {
		case m.IsRegular():
			e.Kind = KindFile
			e.Link.Cid, e.Size, err = p.file(child)
		case m.IsDir():
			e.Kind = KindDir
			e.Link.Cid, e.Size, err = p.dir(child)
		case m&fs.ModeSymlink != 0:
			e.Kind = KindSymlink
			e.Link.Cid, e.Size, err = p.symlink(child)
		default:
			if p.opts.Skipped == nil {
				return cid.Undef, 0, fmt.Errorf("%s: cannot store a %s: %w", child, m.Type(), ErrInvalid)
			}
			p.opts.Skipped(child, m)
			continue
		}
		if err != nil {
			return cid.Undef, 0, err
		}
		total += e.Size
		node.Entries = append(node.Entries, e)
	}
	data, err := Marshal(&node)
	if err != nil {
		return cid.Undef, 0, err
	}
	if len(data) > MaxBlockSize {
		// One node per directory: sharding one is future work.
		return cid.Undef, 0, fmt.Errorf("directory %s: its %d entries make a tree node of %d bytes, over the block limit of %d bytes: %w", rel, len(node.Entries), len(data), MaxBlockSize, ErrTooLarge)
	}
	b := NewBlock(DagCBOR, data)
	return b.cid, total, p.w.Add(p.ctx, b)
}

func (p *treePutter) file(rel string) (cid.Cid, uint64, error) {
	f, err := p.root.Open(rel)
	if err != nil {
		return cid.Undef, 0, err
	}
	defer f.Close()
	base := p.done
	opts := &PutOptions{Writer: p.w}
	if p.opts.Progress != nil {
		opts.Progress = func(n int64) { p.opts.Progress(base + n) }
	}
	c, size, err := PutFile(p.ctx, p.w.st, f, opts)
	if err != nil {
		return cid.Undef, 0, fmt.Errorf("%s: %w", rel, err)
	}
	p.done += int64(size)
	return c, size, nil
}

func (p *treePutter) symlink(rel string) (cid.Cid, uint64, error) {
	target, err := p.root.Readlink(rel)
	if err != nil {
		return cid.Undef, 0, err
	}
	b := NewBlock(Raw, []byte(target))
	return b.cid, uint64(len(target)), p.w.Add(p.ctx, b)
}

// GetTree writes the tree c into the directory dst, which must not exist
// or be empty. It builds the tree in a temporary sibling directory and
// renames it into place, so on any error nothing is left at dst. Every
// write goes through an [os.Root], so no entry can land outside dst,
// and symlinks are created last, so no write passes through one.
//
// A dst that is itself a symlink is followed, as cp and git clone follow
// one: the tree goes where it points (the same rules apply there) and the
// link stays as it was. A symlink that leads nowhere is refused: GetTree
// never replaces a link with a directory.
func GetTree(ctx context.Context, st BlockReader, c cid.Cid, dst string, opts *TreeOptions) error {
	if opts == nil {
		opts = &TreeOptions{}
	}
	return WriteDir(dst, func(root *os.Root) error {
		g := treeGetter{ctx: ctx, st: st, root: root, opts: opts}
		if err := g.dir(c, "."); err != nil {
			return err
		}
		return g.finish()
	})
}

// WriteDir writes a directory at dst, which must not exist or be an empty
// directory (a symlink to one is followed), as the trees of hg get are
// written: write fills a temporary directory beside dst through an
// os.Root (no write can leave it), which is renamed over dst only when
// write succeeds; an error leaves nothing at dst. A writer killed before
// the rename left its directory; the next WriteDir beside it removes it.
func WriteDir(dst string, write func(root *os.Root) error) error {
	name := dst // as the caller knows it
	dst, err := FollowSymlink(dst)
	if err != nil {
		return err
	}
	if dst != name {
		name = fmt.Sprintf("%s (a symlink to %s)", name, dst)
	}
	if ents, err := os.ReadDir(dst); err == nil && len(ents) > 0 {
		return fmt.Errorf("%s exists and is not empty: %w", name, fs.ErrExist)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	SweepDeadTemps(path.Dir(cleanPath(dst)))
	tmp, release, err := MkdirOwnedTemp(path.Dir(cleanPath(dst)))
	if err != nil {
		return err
	}
	defer release()
	defer os.RemoveAll(tmp)
	root, err := os.OpenRoot(tmp)
	if err != nil {
		return err
	}
	err = write(root)
	root.Close()
	if err == nil {
		err = os.Chmod(tmp, 0o755)
	}
	if err != nil {
		return err
	}
	if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.Rename(tmp, dst)
}

// FollowSymlink returns the path that writing to p as a whole (replacing
// it by a rename) should replace: p itself, or, if p is a symlink, the
// path it resolves to, so that the link is kept and what it points to
// is written, as cp writes through one. A symlink whose target does not
// exist (or that loops) is an error wrapping [fs.ErrNotExist] that names
// the link and its target: writing there would have to replace the link.
func FollowSymlink(p string) (string, error) {
	// "link/" names the link too (Lstat would follow it); any other path
	// is left as given.
	link := p
	if t := strings.TrimRight(p, "/"); t != "" {
		link = t
	}
	info, err := os.Lstat(link)
	if err != nil || info.Mode()&fs.ModeSymlink == 0 {
		return p, nil
	}
	p = link
	resolved, err := filepath.EvalSymlinks(p)
	if err != nil {
		target, _ := os.Readlink(p)
		why := "which does not exist"
		if !errors.Is(err, fs.ErrNotExist) {
			why = "which cannot be followed (" + unwrapPathError(err).Error() + ")"
		}
		return "", &symlinkError{
			msg: fmt.Sprintf("%s is a symlink to %s, %s: hg writes where a symlink points and never replaces the link", p, target, why),
			err: fs.ErrNotExist,
		}
	}
	return resolved, nil
}

// symlinkError is a symlink [FollowSymlink] cannot follow.
type symlinkError struct {
	msg string
	err error
}

func (e *symlinkError) Error() string { return e.msg }
func (e *symlinkError) Unwrap() error { return e.err }

// unwrapPathError drops the operation and path of a *fs.PathError, for
// messages that name the path already.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func cleanPath(p string) string {
	if p == "" {
		return "."
	}
	return strings.TrimRight(p, "/")
}

type treeGetter struct {
	ctx      context.Context
	st       BlockReader
	root     *os.Root
	opts     *TreeOptions
	done     int64
	symlinks []pendingLink
	dirModes []pendingMode
}

type pendingLink struct{ target, path string }
type pendingMode struct {
	path string
	mode fs.FileMode
}

func (g *treeGetter) dir(c cid.Cid, rel string) error {
	t, err := LoadTree(g.ctx, g.st, c)
	if err != nil {
		return err
	}
	for _, e := range t.Entries {
		if err := g.ctx.Err(); err != nil {
			return err
		}
		p := path.Join(rel, e.Name)
		if err := CheckStoreName(e.Name); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		switch e.Kind {
		case KindDir:
			if err := g.root.Mkdir(p, 0o700); err != nil {
				return err
			}
			if err := g.dir(e.Link.Cid, p); err != nil {
				return err
			}
			g.dirModes = append(g.dirModes, pendingMode{p, fs.FileMode(e.Mode)})
		case KindFile:
			if err := g.file(e, p); err != nil {
				return err
			}
		case KindSymlink:
			target, err := g.st.Get(g.ctx, e.Link.Cid)
			if err != nil {
				return fmt.Errorf("symlink %s: %w", p, err)
			}
			if uint64(len(target)) != e.Size || bytes.IndexByte(target, 0) >= 0 {
				return fmt.Errorf("symlink %s: bad target: %w", p, ErrInvalid)
			}
			g.symlinks = append(g.symlinks, pendingLink{string(target), p})
		}
	}
	return nil
}

func (g *treeGetter) file(e TreeEntry, p string) error {
	f, err := g.root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	base := g.done
	var progress func(int64)
	if g.opts.Progress != nil {
		progress = func(n int64) { g.opts.Progress(base + n) }
	}
	n, err := ReadFile(g.ctx, g.st, e.Link.Cid, f, progress)
	g.done += n
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if uint64(n) != e.Size {
		return fmt.Errorf("%s: %d bytes where the tree says %d: %w", p, n, e.Size, ErrInvalid)
	}
	return g.root.Chmod(p, fs.FileMode(e.Mode))
}

// finish creates the symlinks, then sets directory modes in the order the
// walk finished them (children before parents), so a read-only directory
// is closed only after its contents are in.
func (g *treeGetter) finish() error {
	for _, l := range g.symlinks {
		if err := g.root.Symlink(l.target, l.path); err != nil {
			return err
		}
	}
	for _, d := range g.dirModes {
		if err := g.root.Chmod(d.path, d.mode); err != nil {
			return err
		}
	}
	return nil
}

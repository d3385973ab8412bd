package cas_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/ipfs/go-cid"
)

func writeFile(t *testing.T, path string, data []byte, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// snapshot describes a directory: for each path, its kind, mode and
// content or symlink target.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "symlink -> " + target
		case d.IsDir():
			if rel != "." {
				out[rel] = "dir " + info.Mode().Perm().String()
			}
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = "file " + info.Mode().Perm().String() + " " + string(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTreeRoundTrip(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "a.txt"), []byte("alpha"), 0o644)
	writeFile(t, filepath.Join(src, "empty"), nil, 0o600)
	writeFile(t, filepath.Join(src, "bin", "run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755)
	writeFile(t, filepath.Join(src, "deep", "er", "est", "x"), randomBytes(cas.ChunkSize+3, 1), 0o644)
	if err := os.Mkdir(filepath.Join(src, "void"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"rel": "a.txt", "up": "../../etc/passwd", "abs": "/etc/passwd"} {
		if err := os.Symlink(target, filepath.Join(src, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(src, "bin"), 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(src, "bin"), 0o755) })

	st := memstore.New()
	root, err := cas.PutTree(ctx, st, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := cas.PutTree(ctx, st, src, nil)
	if err != nil || again != root {
		t.Fatalf("second put: %v %v, want %v", again, err, root)
	}
	dst := filepath.Join(t.TempDir(), "out")
	if err := cas.GetTree(ctx, st, root, dst, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(dst, "bin"), 0o755) })
	want, got := snapshot(t, src), snapshot(t, dst)
	if len(got) != len(want) {
		t.Errorf("got %d entries, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %.60q, want %.60q", k, got[k], v)
		}
	}
	info, err := cas.Stat(ctx, st, root)
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != cas.TypeTree || info.Entries != 8 {
		t.Errorf("stat: %+v", info)
	}
	// A non-empty destination is refused and left alone.
	if err := cas.GetTree(ctx, st, root, dst, nil); !errors.Is(err, fs.ErrExist) {
		t.Errorf("get into a non-empty dir: got %v, want ErrExist", err)
	}
}

// TestGetTreeThroughSymlink: a destination that is a symlink is followed,
// never replaced; one that leads nowhere is refused and left alone.
func TestGetTreeThroughSymlink(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "a.txt"), []byte("alpha"), 0o644)
	st := memstore.New()
	root, err := cas.PutTree(ctx, st, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	target, link := filepath.Join(work, "target"), filepath.Join(work, "link")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target", link); err != nil {
		t.Fatal(err)
	}
	if err := cas.GetTree(ctx, st, root, link, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := os.Readlink(link); err != nil || got != "target" {
		t.Fatalf("the link became %q, %v; want it kept, pointing at target", got, err)
	}
	if data, err := os.ReadFile(filepath.Join(target, "a.txt")); err != nil || string(data) != "alpha" {
		t.Fatalf("target/a.txt = %q, %v", data, err)
	}
	// Now not empty: refused, naming the link and where it points.
	err = cas.GetTree(ctx, st, root, link, nil)
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "link (a symlink to ") {
		t.Errorf("get into a link to a non-empty dir: %v", err)
	}

	// "link/" is the link as well.
	if err := os.Mkdir(filepath.Join(work, "target2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target2", filepath.Join(work, "link2")); err != nil {
		t.Fatal(err)
	}
	if err := cas.GetTree(ctx, st, root, filepath.Join(work, "link2")+"/", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := os.Readlink(filepath.Join(work, "link2")); err != nil || got != "target2" {
		t.Fatalf("link2/ became %q, %v; want it kept", got, err)
	}
	if _, err := os.Stat(filepath.Join(work, "target2", "a.txt")); err != nil {
		t.Fatal(err)
	}

	dangling := filepath.Join(work, "dangling")
	if err := os.Symlink("nowhere", dangling); err != nil {
		t.Fatal(err)
	}
	err = cas.GetTree(ctx, st, root, dangling, nil)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "is a symlink to nowhere, which does not exist") {
		t.Errorf("get into a dangling link: %v", err)
	}
	if got, err := os.Readlink(dangling); err != nil || got != "nowhere" {
		t.Errorf("the dangling link became %q, %v; want it left alone", got, err)
	}
	if _, err := os.Lstat(filepath.Join(work, "nowhere")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("something was made at the dangling link's target: %v", err)
	}
}

// putTree stores a hand-made tree node, bypassing every check, as a hostile
// peer would.
func putTree(t *testing.T, st cas.Store, entries []cas.TreeEntry) cid.Cid {
	t.Helper()
	data, err := cas.Marshal(&cas.TreeNode{Type: cas.TypeTree, Entries: entries})
	if err != nil {
		t.Fatal(err)
	}
	b := cas.NewBlock(cas.DagCBOR, data)
	if err := st.Put(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	return b.CID()
}

// A tree holding a store's directory name (in any case) is a well-formed
// tree, but is not written out: hg run below the output would take it for
// its store, with the keys and trust list of whoever made the tree.
func TestTreeStoreNameNotWritten(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	file, _, err := cas.PutFile(ctx, st, stringsReader("hg ed25519 seed AAAA"), nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := putTree(t, st, []cas.TreeEntry{{Name: "runner.key", Kind: cas.KindFile, Mode: 0o600, Size: 20, Link: cas.Link{Cid: file}}})
	for _, name := range []string{".haygent", ".HayGent"} {
		store := putTree(t, st, []cas.TreeEntry{{Name: "keys", Kind: cas.KindDir, Mode: 0o700, Link: cas.Link{Cid: keys}}})
		proj := putTree(t, st, []cas.TreeEntry{{Name: name, Kind: cas.KindDir, Mode: 0o755, Link: cas.Link{Cid: store}}})
		root := putTree(t, st, []cas.TreeEntry{{Name: "project", Kind: cas.KindDir, Mode: 0o755, Link: cas.Link{Cid: proj}}})
		if _, err := cas.Stat(ctx, st, root); err != nil {
			t.Fatalf("%s: stat: %v", name, err)
		}
		parent := t.TempDir()
		err := cas.GetTree(ctx, st, root, filepath.Join(parent, "out"), nil)
		if !errors.Is(err, cas.ErrInvalid) || !strings.Contains(err.Error(), "project/"+name) {
			t.Fatalf("%s: GetTree = %v, want refused naming project/%s", name, err, name)
		}
		if left, _ := os.ReadDir(parent); len(left) != 0 {
			t.Fatalf("%s: left behind: %v", name, left)
		}
	}
}

func TestTreeMaliciousNames(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	file, _, err := cas.PutFile(ctx, st, stringsReader("pwned"), nil)
	if err != nil {
		t.Fatal(err)
	}
	entry := func(name string) cas.TreeEntry {
		return cas.TreeEntry{Name: name, Kind: cas.KindFile, Mode: 0o644, Size: 5, Link: cas.Link{Cid: file}}
	}
	cases := map[string][]cas.TreeEntry{
		"empty":     {entry("")},
		"dot":       {entry(".")},
		"dotdot":    {entry("..")},
		"slash":     {entry("../../escape")},
		"abs":       {entry("/tmp/escape")},
		"backslash": {entry(`..\escape`)},
		"nul":       {entry("a\x00b")},
		"dup":       {entry("a"), entry("a")},
		"unsorted":  {entry("b"), entry("a")},
		"setuid":    {{Name: "x", Kind: cas.KindFile, Mode: 0o4755, Size: 5, Link: cas.Link{Cid: file}}},
		"kind":      {{Name: "x", Kind: "device", Mode: 0o644, Size: 5, Link: cas.Link{Cid: file}}},
		"codec":     {{Name: "x", Kind: cas.KindSymlink, Mode: 0o644, Size: 5, Link: cas.Link{Cid: file}}},
	}
	for name, entries := range cases {
		t.Run(name, func(t *testing.T) {
			root := putTree(t, st, entries)
			parent := t.TempDir()
			dst := filepath.Join(parent, "out")
			err := cas.GetTree(ctx, st, root, dst, nil)
			if !errors.Is(err, cas.ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
			left, _ := os.ReadDir(parent)
			if len(left) != 0 {
				t.Fatalf("left behind: %v", left)
			}
			if _, err := cas.Stat(ctx, st, root); !errors.Is(err, cas.ErrInvalid) {
				t.Fatalf("stat: got %v, want ErrInvalid", err)
			}
		})
	}
	// The same bad entry one level down is refused too.
	inner := putTree(t, st, []cas.TreeEntry{entry("..")})
	outer := putTree(t, st, []cas.TreeEntry{{Name: "d", Kind: cas.KindDir, Mode: 0o755, Link: cas.Link{Cid: inner}}})
	if err := cas.GetTree(ctx, st, outer, filepath.Join(t.TempDir(), "o"), nil); !errors.Is(err, cas.ErrInvalid) {
		t.Fatalf("nested: got %v, want ErrInvalid", err)
	}
}

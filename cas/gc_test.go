package cas_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/cas/storetest"
	"github.com/ipfs/go-cid"
)

func TestGCKeepsPinnedClosure(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	keep := randomBytes(2*cas.ChunkSize+1, 1)
	drop := randomBytes(cas.ChunkSize+1, 2)
	kc, _, err := cas.PutFile(ctx, st, bytes.NewReader(keep), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := cas.PutFile(ctx, st, bytes.NewReader(drop), nil); err != nil {
		t.Fatal(err)
	}
	if err := st.SetPin(ctx, "keep", kc); err != nil {
		t.Fatal(err)
	}
	dry, err := cas.GC(ctx, st, &cas.GCOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if countBlocks(t, st) != 7 {
		t.Fatalf("dry run removed blocks")
	}
	stats, err := cas.GC(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Removed != 3 || stats.Kept != 4 || stats.FreedBytes < int64(len(drop)) {
		t.Fatalf("stats %+v", stats)
	}
	if dry.Removed != stats.Removed || dry.FreedBytes != stats.FreedBytes {
		t.Fatalf("dry run %+v differs from real run %+v", dry, stats)
	}
	if countBlocks(t, st) != 4 {
		t.Fatalf("%d blocks left, want 4", countBlocks(t, st))
	}
	var out bytes.Buffer
	if _, err := cas.ReadFile(ctx, st, kc, &out, nil); err != nil || !bytes.Equal(out.Bytes(), keep) {
		t.Fatalf("pinned file damaged: %v", err)
	}
	// Unpinned, everything goes.
	if err := st.DeletePin(ctx, "keep"); err != nil {
		t.Fatal(err)
	}
	if _, err := cas.GC(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	if n := countBlocks(t, st); n != 0 {
		t.Fatalf("%d blocks left after unpinning", n)
	}
}

func TestGCRefusesOnMissingBlock(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	data := randomBytes(2*cas.ChunkSize, 3)
	c, _, err := cas.PutFile(ctx, st, bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	chunk := cas.NewBlock(cas.Raw, data[:cas.ChunkSize]).CID()
	if err := st.Delete(ctx, chunk); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cas.PutFile(ctx, st, bytes.NewReader([]byte("garbage")), nil); err != nil {
		t.Fatal(err)
	}
	if err := st.SetPin(ctx, "p", c); err != nil {
		t.Fatal(err)
	}
	before := countBlocks(t, st)
	_, err = cas.GC(ctx, st, nil)
	var nf *cas.NotFoundError
	if !errors.As(err, &nf) || nf.CID != chunk {
		t.Fatalf("got %v, want NotFoundError for %s", err, chunk)
	}
	if countBlocks(t, st) != before {
		t.Fatal("gc removed blocks after a failed mark")
	}
}

func TestFsck(t *testing.T) {
	ctx := context.Background()
	st := storetest.NewCorruptible(memstore.New())
	data := randomBytes(3*cas.ChunkSize, 4)
	c, _, err := cas.PutFile(ctx, st, bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetPin(ctx, "f", c); err != nil {
		t.Fatal(err)
	}
	rep, err := cas.Fsck(ctx, st, nil)
	if err != nil || !rep.OK() || rep.Blocks != 4 {
		t.Fatalf("clean store: %+v, %v", rep, err)
	}
	chunk := cas.NewBlock(cas.Raw, data[cas.ChunkSize:2*cas.ChunkSize]).CID()
	bad := bytes.Clone(data[cas.ChunkSize : 2*cas.ChunkSize])
	bad[0] ^= 0x80
	st.Corrupt(chunk, bad)
	rep, err = cas.Fsck(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || len(rep.Bad) != 1 || rep.Bad[0].CID != chunk {
		t.Fatalf("corrupt chunk: %+v", rep)
	}
	last := cas.NewBlock(cas.Raw, data[2*cas.ChunkSize:]).CID()
	if err := st.Delete(ctx, last); err != nil {
		t.Fatal(err)
	}
	rep, err = cas.Fsck(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Missing) != 1 || rep.Missing[0].Pin != "f" {
		t.Fatalf("missing chunk: %+v", rep)
	}
}

// fsck checks the sizes hg/tree@1 and hg/file@1 nodes record against
// their children: a tree that says a file holds 2^64-1 bytes, a
// directory's total that is not its entries', a symlink's length that is
// not its target's, a file node whose size is not its chunks', each
// hashes correctly and is named; a tree put by hg is clean.
func TestFsckChecksSizes(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello"), 0o644)
	os.WriteFile(filepath.Join(dir, "sub", "b.bin"), randomBytes(cas.ChunkSize+10, 9), 0o644)
	os.Symlink("a.txt", filepath.Join(dir, "link"))
	root, err := cas.PutTree(ctx, st, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetPin(ctx, "tree", root); err != nil {
		t.Fatal(err)
	}
	rep, err := cas.Fsck(ctx, st, nil)
	if err != nil || !rep.OK() {
		t.Fatalf("a tree hg put: %+v, %v", rep, err)
	}
	good, err := cas.LoadTree(ctx, st, root)
	if err != nil {
		t.Fatal(err)
	}
	// forge stores a copy of the root with one entry's size changed, or
	// with a file node of another size in its place, and pins it.
	forge := func(name string, edit func(t *cas.TreeNode)) cid.Cid {
		tr := *good
		tr.Entries = slices.Clone(good.Entries)
		edit(&tr)
		data, err := cas.Marshal(&tr)
		if err != nil {
			t.Fatal(err)
		}
		b := cas.NewBlock(cas.DagCBOR, data)
		if err := st.Put(ctx, b); err != nil {
			t.Fatal(err)
		}
		if err := st.SetPin(ctx, name, b.CID()); err != nil {
			t.Fatal(err)
		}
		return b.CID()
	}
	entry := func(tr *cas.TreeNode, name string) *cas.TreeEntry {
		for i := range tr.Entries {
			if tr.Entries[i].Name == name {
				return &tr.Entries[i]
			}
		}
		t.Fatalf("no entry %s", name)
		return nil
	}
	huge := forge("huge", func(tr *cas.TreeNode) { entry(tr, "a.txt").Size = math.MaxUint64 })
	dirSize := forge("dirsize", func(tr *cas.TreeNode) { entry(tr, "sub").Size++ })
	linkSize := forge("linksize", func(tr *cas.TreeNode) { entry(tr, "link").Size = 99 })
	lying := cas.FileNode{Type: cas.TypeFile, Size: 6, Links: []cas.Link{{Cid: cas.NewBlock(cas.Raw, []byte("hello")).CID()}}}
	data, err := cas.Marshal(&lying)
	if err != nil {
		t.Fatal(err)
	}
	lyingBlock := cas.NewBlock(cas.DagCBOR, data)
	if err := st.Put(ctx, lyingBlock); err != nil {
		t.Fatal(err)
	}
	if err := st.SetPin(ctx, "lying", lyingBlock.CID()); err != nil {
		t.Fatal(err)
	}
	rep, err = cas.Fsck(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[cid.Cid]string{
		huge:             `entry "a.txt" says 18446744073709551615 bytes`,
		dirSize:          `entry "sub" says`,
		linkSize:         `entry "link" says 99 bytes`,
		lyingBlock.CID(): "says 6 bytes",
	}
	if rep.OK() {
		t.Fatal("fsck found nothing")
	}
	found := map[cid.Cid]bool{}
	for _, b := range rep.Invalid {
		w, ok := want[b.CID]
		if !ok {
			t.Errorf("invalid %s: %s; it is not one of the forged nodes", b.CID, b.Error)
		}
		found[b.CID] = found[b.CID] || strings.Contains(b.Error, w)
	}
	for c, w := range want {
		if !found[c] {
			t.Errorf("%s: no finding saying %q in %+v", c, w, rep.Invalid)
		}
	}
}

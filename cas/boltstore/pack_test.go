package boltstore

import (
	"errors"

	"bytes"
	"context"
	"github.com/ipfs/go-cid"
	"os"
	"path/filepath"
	"testing"

	"github.com/haygent/hg/cas"
)

func bigBlock(seed byte, size int) cas.Block {
	d := bytes.Repeat([]byte{seed, seed ^ 0x5a, 7}, size/3+1)[:size]
	return cas.NewBlock(cas.Raw, d)
}

func packFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, packDir, "*.pack"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range names {
		names[i] = filepath.Base(names[i])
	}
	return names
}

func TestPacksRotateAndDrop(t *testing.T) {
	setPackMax(t, 300<<10)
	ctx := context.Background()
	s, dir := newStore(t)
	defer s.Close()

	var blocks []cas.Block
	for i := range 6 {
		blocks = append(blocks, bigBlock(byte(i), 200<<10))
	}
	small := cas.NewBlock(cas.Raw, []byte("small stays inline"))
	if err := s.Put(ctx, append(blocks[:3:3], small)...); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, blocks[3:]...); err != nil {
		t.Fatal(err)
	}
	// 200 KiB blocks, rotation past 300 KiB: two blocks a pack.
	if got := packFiles(t, dir); len(got) != 3 {
		t.Fatalf("pack files %v, want 3", got)
	}
	getsBack(t, s, append(blocks, small))
	// Deleting both blocks of the first pack, then compacting, removes
	// its file; the others stay readable.
	if err := s.Delete(ctx, blocks[0].CID(), blocks[1].CID()); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Compact(ctx, nil); err != nil || st.PacksRemoved != 1 {
		t.Fatalf("compact: %+v, %v; want one pack removed", st, err)
	}
	if got := packFiles(t, dir); len(got) != 2 || got[0] != packName(2) {
		t.Fatalf("after delete: pack files %v", got)
	}
	for _, b := range blocks[2:] {
		if _, err := s.Get(ctx, b.CID()); err != nil {
			t.Fatalf("get %s after delete: %v", b.CID(), err)
		}
	}
	n := 0
	if err := s.AllKeys(ctx, func(_ cid.Cid, size int) error {
		if size != 200<<10 && size != len(small.Data()) {
			t.Errorf("size %d", size)
		}
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Fatalf("AllKeys saw %d blocks, want 5", n)
	}
}

// A Put that dies after writing pack data but before its commit leaves
// bytes past the committed end; the next writer cuts them off, and later
// Puts and reads are unaffected.
func TestPackRecoveryTruncatesTail(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	a := bigBlock(1, 100<<10)
	if err := s.Put(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, packDir, packName(1))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(bytes.Repeat([]byte("torn"), 5000))
	f.Close()

	s, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if info, err := os.Stat(path); err != nil || info.Size() != 100<<10 {
		t.Fatalf("pack after recovery: %v, size %d; want %d", err, info.Size(), 100<<10)
	}
	b := bigBlock(2, 150<<10)
	if err := s.Put(ctx, b); err != nil {
		t.Fatal(err)
	}
	for _, blk := range []cas.Block{a, b} {
		got, err := s.Get(ctx, blk.CID())
		if err != nil || !bytes.Equal(got, blk.Data()) {
			t.Fatalf("get %s: %v", blk.CID(), err)
		}
	}
}

// A flipped byte in a pack file is caught on read.
func TestPackedCorruption(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	a := bigBlock(3, 100<<10)
	if err := s.Put(ctx, a); err != nil {
		t.Fatal(err)
	}
	s.Close()
	corrupt(t, dir, a.CID(), 70000)
	s, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ce *cas.CorruptError
	if _, err := s.Get(ctx, a.CID()); !errors.As(err, &ce) {
		t.Fatalf("get: %v, want a CorruptError", err)
	}
}

// packedSize is how many bytes the store's packs hold.
func packedSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	for _, name := range packFiles(t, dir) {
		fi, err := os.Stat(filepath.Join(dir, packDir, name))
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// Small blocks go to a pack in a Put that holds enough of them to be
// worth the pack's fsync, and stay inline in a small Put; either way
// they read back, and damage to a packed one is found.
func TestSmallBlocksPackedInBigPuts(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	few := []cas.Block{bigBlock(1, 1000), bigBlock(2, 1000), bigBlock(3, 1000)}
	if err := s.Put(ctx, few...); err != nil {
		t.Fatal(err)
	}
	if n := packedSize(t, dir); n != 0 {
		t.Fatalf("a Put of 3 KiB wrote %d bytes to packs; want them inline", n)
	}
	var many []cas.Block
	total := 0
	for i := range 400 {
		b := bigBlock(byte(i), 1000+i)
		many = append(many, b)
		total += len(b.Data())
	}
	if err := s.Put(ctx, many...); err != nil {
		t.Fatal(err)
	}
	if n := packedSize(t, dir); n != int64(total) {
		t.Fatalf("a Put of %d bytes of small blocks wrote %d bytes to packs; want all of them", total, n)
	}
	getsBack(t, s, append(few, many...))
	s.Close()
	corrupt(t, dir, many[7].CID(), 3)
	s, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Get(ctx, many[7].CID()); !errors.Is(err, cas.ErrCorrupt) {
		t.Fatalf("get of a damaged packed small block: %v, want ErrCorrupt", err)
	}
}

// The current pack, once nothing live is left in it (a refused import's
// blocks deleted, say), is emptied by the next compaction rather than
// kept at its size; blocks put afterwards are stored and read back from
// it.
func TestEmptyCurrentPackIsCut(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	defer s.Close()
	a, b := bigBlock(1, 200<<10), bigBlock(2, 200<<10)
	if err := s.Put(ctx, a, b); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, a.CID(), b.CID()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Compact(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range packFiles(t, dir) {
		info, err := os.Stat(filepath.Join(dir, packDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if info.Size() != 0 {
			t.Fatalf("pack %s keeps %d bytes with no live block", name, info.Size())
		}
	}
	c := bigBlock(3, 200<<10)
	if err := s.Put(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, c.CID())
	if err != nil || !bytes.Equal(got, c.Data()) {
		t.Fatalf("get after the pack was cut: %v", err)
	}
	if ok, _ := s.Has(ctx, a.CID()); ok {
		t.Fatal("a deleted block is back")
	}
}

// A Put whose small blocks add up to more than the write buffer holds
// writes them in several calls, each byte once, at the right offsets.
func TestSmallBlocksBeyondTheWriteBuffer(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	var many []cas.Block
	total := 0
	for i := 0; total <= writeBufMax+writeBufMax/2; i++ {
		b := bigBlock(byte(i), 1000+i%3000)
		many = append(many, b)
		total += len(b.Data())
	}
	if err := s.Put(ctx, many...); err != nil {
		t.Fatal(err)
	}
	if n := packedSize(t, dir); n != int64(total) {
		t.Fatalf("a Put of %d bytes of small blocks wrote %d bytes to packs", total, n)
	}
	getsBack(t, s, many)
}

// getsBack fails the test unless every block reads back as put.
// setPackMax rotates packs at n bytes until the test ends.
func setPackMax(t *testing.T, n uint64) {
	old := packMax
	packMax = n
	t.Cleanup(func() { packMax = old })
}

func getsBack(t *testing.T, s *Store, blocks []cas.Block) {
	t.Helper()
	for _, b := range blocks {
		got, err := s.Get(context.Background(), b.CID())
		if err != nil || !bytes.Equal(got, b.Data()) {
			t.Fatalf("get %s: %v", b.CID(), err)
		}
	}
}

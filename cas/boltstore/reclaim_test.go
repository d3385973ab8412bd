package boltstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
	bolt "go.etcd.io/bbolt"
)

// setStat overwrites pack n's bookkeeping in the open store s, as one
// wrong number in the packs bucket would.
func setStat(t *testing.T, s *Store, n uint64, ps packStat) {
	t.Helper()
	if err := s.db.Update(func(tx *bolt.Tx) error { return putPackStat(tx, n, ps) }); err != nil {
		t.Fatal(err)
	}
}

// dropStat removes pack n's bookkeeping from the open store s.
func dropStat(t *testing.T, s *Store, n uint64) {
	t.Helper()
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketPacks).Delete(packKey(n)) }); err != nil {
		t.Fatal(err)
	}
}

// statOf returns pack n's bookkeeping in the open store s.
func statOf(t *testing.T, s *Store, n uint64) packStat {
	t.Helper()
	var ps packStat
	if err := s.db.View(func(tx *bolt.Tx) error { ps, _ = getPackStat(tx, n); return nil }); err != nil {
		t.Fatal(err)
	}
	return ps
}

// reopen closes s and opens the store in dir again for writing, which
// runs the recovery of packs.
func reopen(t *testing.T, s *Store, dir string) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	return s
}

// gcFixture fills pack 1 with three 100 KiB blocks (the first of them
// garbage, the other two pinned) and pack 2 with one more pinned block.
func gcFixture(t *testing.T) (s *Store, dir string, garbage cas.Block, pinned []cas.Block) {
	t.Helper()
	setPackMax(t, 250<<10)
	s, dir = newStore(t)
	ctx := context.Background()
	garbage = bigBlock(1, 100<<10)
	pinned = []cas.Block{bigBlock(2, 100<<10), bigBlock(3, 100<<10), bigBlock(4, 100<<10)}
	if err := s.Put(ctx, garbage, pinned[0], pinned[1], pinned[2]); err != nil {
		t.Fatal(err)
	}
	for i, b := range pinned {
		if err := s.SetPin(ctx, string(rune('a'+i)), b.CID()); err != nil {
			t.Fatal(err)
		}
	}
	if got := packFiles(t, dir); len(got) != 2 {
		t.Fatalf("pack files %v, want 2", got)
	}
	return s, dir, garbage, pinned
}

// gc never removes or cuts a pack the index still points into, whatever
// its count says: one wrong number in the packs bucket (a count of 1 in
// a pack that holds three blocks, a missing entry, an end short of the
// last block) costs no block.
func TestGCTrustsTheIndexNotTheCounts(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		wrong func(t *testing.T, s *Store)
	}{
		{"count too low", func(t *testing.T, s *Store) {
			ps := statOf(t, s, 1)
			ps.live = 1
			setStat(t, s, 1, ps)
		}},
		{"no entry", func(t *testing.T, s *Store) { dropStat(t, s, 1) }},
		{"end too short", func(t *testing.T, s *Store) {
			ps := statOf(t, s, 1)
			ps.end = 100 << 10
			setStat(t, s, 1, ps)
		}},
		{"current pack counted empty", func(t *testing.T, s *Store) {
			setStat(t, s, 2, packStat{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dir, garbage, pinned := gcFixture(t)
			tc.wrong(t, s)
			// Through a writer's recovery, then gc, then another
			// recovery: the pinned blocks stay.
			s = reopen(t, s, dir)
			stats, err := cas.GC(ctx, s, nil)
			if err != nil {
				t.Fatalf("gc: %v", err)
			}
			if stats.Removed != 1 {
				t.Errorf("gc removed %d blocks, want 1", stats.Removed)
			}
			s = reopen(t, s, dir)
			defer s.Close()
			getsBack(t, s, pinned)
			if ok, _ := s.Has(ctx, garbage.CID()); ok {
				t.Error("the garbage block is still there")
			}
			// A Put after all that lands beside the pinned blocks, not
			// over them.
			more := bigBlock(9, 100<<10)
			if err := s.Put(ctx, more); err != nil {
				t.Fatal(err)
			}
			getsBack(t, s, append(pinned, more))
		})
	}
}

// Deleting blocks never touches a pack file: the space goes back when
// gc compacts (or the next writer's recovery finds a pack nothing points
// into), and both decide from the index itself.
func TestDeleteLeavesFilesToReclaim(t *testing.T) {
	ctx := context.Background()
	s, dir, garbage, pinned := gcFixture(t)
	before := packedSize(t, dir)
	if err := s.Delete(ctx, garbage.CID(), pinned[2].CID()); err != nil {
		t.Fatal(err)
	}
	if got := packedSize(t, dir); got != before {
		t.Fatalf("Delete changed the packs from %d to %d bytes", before, got)
	}
	// Pack 2, nothing left in it, is cut by the next writer.
	s = reopen(t, s, dir)
	defer s.Close()
	getsBack(t, s, pinned[:2])
	if info, err := os.Stat(filepath.Join(dir, packDir, packName(2))); err == nil && info.Size() != 0 {
		t.Errorf("pack 2 keeps %d bytes with no block in it", info.Size())
	}
	got, err := s.Get(ctx, pinned[0].CID())
	if err != nil || !bytes.Equal(got, pinned[0].Data()) {
		t.Fatal(err)
	}
}

// A refused import gives its blocks' space back at once: the import
// undoes itself, then compacts what needs no copying.
func TestRefusedImportLeavesNoBytes(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	defer s.Close()
	kept := bigBlock(7, 300<<10)
	if err := s.Put(ctx, kept); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPin(ctx, "kept", kept.CID()); err != nil {
		t.Fatal(err)
	}
	before := packedSize(t, dir)
	var blocks []cas.Block
	for i := range 24 { // past the writer's 16 MiB batch: some are stored before the refusal
		blocks = append(blocks, bigBlock(byte(100+i), 1<<20))
	}
	var car bytes.Buffer
	w, err := cas.NewCARWriter(&car, []cid.Cid{blocks[0].CID()})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		if err := w.WriteBlock(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	data := car.Bytes()
	data[len(data)-1] ^= 0xff // the last block no longer matches its CID
	if _, err := cas.ImportCAR(ctx, s, bytes.NewReader(data), nil); !errors.Is(err, cas.ErrCorrupt) {
		t.Fatalf("import of a damaged bundle: %v, want ErrCorrupt", err)
	}
	if after := packedSize(t, dir); after != before {
		t.Errorf("the refused import left the packs at %d bytes, %d before", after, before)
	}
	getsBack(t, s, []cas.Block{kept})
}

package boltstore

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/haygent/hg/cas"
	bolt "go.etcd.io/bbolt"
)

// packedAt returns where block c lies in its pack.
func packedAt(t *testing.T, s *Store, c cas.Block) location {
	t.Helper()
	var l location
	err := view(s.db, func(tx *bolt.Tx) error {
		e, err := decodeEntry(tx.Bucket(bucketBlocks).Get(c.CID().Bytes()))
		if err != nil {
			return err
		}
		if !e.packed {
			t.Fatalf("block %s is inline, want packed", c.CID())
		}
		l = e.loc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Large blocks written past the page cache, between small blocks gathered
// through it, read back whole; on Linux (where the file system allows
// them) they start on aligned offsets, and the pack ends where its
// committed end says, padding included, so recovery cuts nothing and fsck
// finds nothing. The same holds with direct writes unavailable.
func TestDirectWrites(t *testing.T) {
	for _, direct := range []bool{true, false} {
		name := map[bool]string{true: "direct", false: "page cache"}[direct]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, dir := newStore(t)
			s.packs.noDirect = !direct
			var smalls []cas.Block
			for i := range 300 { // > packSmallMin in all: they go to the pack
				smalls = append(smalls, bigBlock(byte(i), 1000+i))
			}
			odd := bigBlock(1, directMin+123)                 // copied to an aligned buffer
			round := cas.NewBlock(cas.Raw, alignedBuf(1<<20)) // written as it is, if aligned
			copy(round.Data(), "a megabyte, mostly zeros")
			round = cas.NewBlock(cas.Raw, round.Data())
			under := bigBlock(2, directMin-1) // below directMin: page cache
			all := append(append([]cas.Block{}, smalls[:150]...), odd, under)
			all = append(append(all, smalls[150:]...), round)
			if err := s.Put(ctx, all...); err != nil {
				t.Fatal(err)
			}
			if err := s.Put(ctx, bigBlock(3, directMin)); err != nil { // a second Put after the padding
				t.Fatal(err)
			}
			all = append(all, bigBlock(3, directMin))
			wantDirect := direct && runtime.GOOS == "linux" && s.packs.directFile(1) != nil
			t.Logf("direct writes in use: %v", wantDirect)
			for _, b := range []cas.Block{odd, round} {
				l := packedAt(t, s, b)
				if wantDirect && l.offset%directAlign != 0 {
					t.Errorf("block of %d bytes at offset %d, not aligned", len(b.Data()), l.offset)
				}
			}
			var end uint64
			if err := view(s.db, func(tx *bolt.Tx) error { ps, _ := getPackStat(tx, 1); end = ps.end; return nil }); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			info, err := os.Stat(filepath.Join(dir, packDir, packName(1)))
			if err != nil {
				t.Fatal(err)
			}
			if uint64(info.Size()) != end {
				t.Errorf("pack is %d bytes, its committed end %d", info.Size(), end)
			}
			s, err = Open(dir, nil) // a writer: recovery runs
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			getsBack(t, s, all)
			rep, err := cas.Fsck(ctx, s, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() {
				t.Fatalf("fsck: %+v", rep)
			}
		})
	}
}

// alignedBuf starts on the boundary and is as long as asked.
func TestAlignedBuf(t *testing.T) {
	for _, n := range []int{1, directAlign, 3*directAlign + 5} {
		b := alignedBuf(n)
		if len(b) != n || cap(b) != n {
			t.Fatalf("alignedBuf(%d): len %d cap %d", n, len(b), cap(b))
		}
		if n%directAlign == 0 && !isAligned(b) {
			t.Fatalf("alignedBuf(%d) is not aligned", n)
		}
	}
}

// A full pack's direct-write descriptor is closed when writing moves on
// to the next pack, and a pack gc removes loses it too: an unlinked file
// held open keeps its disk space until the store closes.
func TestRemovedPackClosesItsDirectFile(t *testing.T) {
	setPackMax(t, 500<<10)
	ctx := context.Background()
	s, _ := newStore(t)
	defer s.Close()
	first, second := bigBlock(1, directMin), bigBlock(2, directMin)
	for _, b := range []cas.Block{first, bigBlock(3, directMin), second} {
		if err := s.Put(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if packedAt(t, s, second).pack != 2 {
		t.Fatalf("the third block went to pack %d, want 2", packedAt(t, s, second).pack)
	}
	s.packs.mu.Lock()
	_, open := s.packs.direct[1]
	s.packs.mu.Unlock()
	if open {
		t.Fatal("pack 1 is full but its direct-write file is still open")
	}
	if s.packs.directFile(1) == nil {
		t.Skip("no direct writes on this file system")
	}
	if err := s.Delete(ctx, first.CID(), bigBlock(3, directMin).CID()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Compact(ctx, nil); err != nil {
		t.Fatal(err)
	}
	s.packs.mu.Lock()
	_, open = s.packs.direct[1]
	s.packs.mu.Unlock()
	if open {
		t.Fatal("pack 1 was removed but its direct-write file is still open")
	}
	getsBack(t, s, []cas.Block{second})
}

// Only a file system's refusal turns direct writes off for good; a
// passing failure to open (out of descriptors) costs one write its
// directness, and the next write tries again.
func TestDirectOpenFailures(t *testing.T) {
	for _, tc := range []struct {
		err      error
		disabled bool
	}{
		{syscall.EMFILE, false},
		{syscall.EINVAL, true},
		{syscall.EOPNOTSUPP, true},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			s, _ := newStore(t)
			defer s.Close()
			if err := s.Put(context.Background(), bigBlock(1, 1000)); err != nil {
				t.Fatal(err)
			}
			real := openDirectFile
			t.Cleanup(func() { openDirectFile = real })
			openDirectFile = func(string) (*os.File, error) { return nil, tc.err }
			if f := s.packs.directFile(1); f != nil {
				t.Fatal("directFile returned a file after a failed open")
			}
			if s.packs.noDirect != tc.disabled {
				t.Fatalf("after %v: direct writes disabled %v, want %v", tc.err, s.packs.noDirect, tc.disabled)
			}
			// Whatever happened, large blocks still go in and come back.
			b := bigBlock(2, directMin)
			if err := s.Put(context.Background(), b); err != nil {
				t.Fatal(err)
			}
			getsBack(t, s, []cas.Block{b})
		})
	}
}

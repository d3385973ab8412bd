package boltstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
)

// compactFixture fills a store whose packs rotate at 1 MiB with forty
// 100 KiB blocks and 1200 blocks of about 1 KiB, put in turns, and pins
// every fifth of each: the packs end up mostly dead, none wholly. It
// returns the pinned blocks and their bytes.
func compactFixture(t *testing.T, s *Store) (pinned []cas.Block, live int64) {
	t.Helper()
	ctx := context.Background()
	for round := range 4 {
		var big, small []cas.Block
		for i := range 10 {
			big = append(big, bigBlock(byte(round*10+i), 100<<10+i))
		}
		for i := range 300 {
			small = append(small, bigBlock(byte(i), 1024+round*300+i))
		}
		if err := s.Put(ctx, big...); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, small...); err != nil { // over 256 KiB: packed
			t.Fatal(err)
		}
		for i, b := range append(big, small...) {
			if i%5 == 0 {
				pinned = append(pinned, b)
				live += int64(len(b.Data()))
			}
		}
	}
	for i, b := range pinned {
		if err := s.SetPin(ctx, fmt.Sprintf("p%d", i), b.CID()); err != nil {
			t.Fatal(err)
		}
	}
	return pinned, live
}

// checkClean fails the test unless CheckStore finds nothing wrong.
func checkClean(t *testing.T, s *Store) {
	t.Helper()
	probs, err := s.CheckStore(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range probs {
		t.Errorf("store check: %s: %s", p.Where, p.Error)
	}
}

// gc gives the disk back: the live blocks of packs that are mostly dead
// are copied into new packs and the old files removed, so the packs end
// up within a few percent of the live bytes; every pinned block reads
// back and the store checks clean.
func TestGCCompactsMostlyDeadPacks(t *testing.T) {
	setPackMax(t, 1<<20)
	ctx := context.Background()
	s, dir := newStore(t)
	defer func() { s.Close() }()
	pinned, live := compactFixture(t, s)
	before := packedSize(t, dir)
	stats, err := cas.GC(ctx, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	after := packedSize(t, dir)
	t.Logf("packs: %d bytes before, %d after, %d live; %+v", before, after, live, stats.CompactStats)
	getsBack(t, s, pinned)
	checkClean(t, s)
	// Inline small blocks are not in packs; the rest must be within 5%
	// (the default) plus the alignment of direct writes.
	if after > live+live/20+int64(len(packFiles(t, dir)))*directAlign {
		t.Errorf("after gc the packs hold %d bytes for %d live", after, live)
	}
	if stats.DiskFreedBytes < (before-after)/2 {
		t.Errorf("gc reports %d bytes freed on disk, the packs shrank by %d", stats.DiskFreedBytes, before-after)
	}
	s = reopen(t, s, dir)
	getsBack(t, s, pinned)
	checkClean(t, s)
}

// --max-unused bounds the dead space left: unlimited copies nothing, a
// bound above what is dead copies nothing, 0 leaves no dead byte, and a
// bound in between rewrites the packs with most dead space first and
// stops once within it.
func TestMaxUnused(t *testing.T) {
	setPackMax(t, 1<<20)
	ctx := context.Background()
	for _, tc := range []struct {
		limit     string
		rewritten func(n int) bool
		unused    func(left, live int64) bool
	}{
		{"unlimited", func(n int) bool { return n == 0 }, func(left, live int64) bool { return left > live }},
		{"1000%", func(n int) bool { return n == 0 }, func(left, live int64) bool { return left > live }},
		{"0", func(n int) bool { return n == 6 }, func(left, live int64) bool { return left == 0 }},
		{"0%", func(n int) bool { return n == 6 }, func(left, live int64) bool { return left == 0 }},
		{"150%", func(n int) bool { return n > 0 && n < 6 }, func(left, live int64) bool { return left <= live*3/2 && left > 0 }},
		{"2M", func(n int) bool { return n > 0 && n < 6 }, func(left, live int64) bool { return left <= 2<<20 }},
	} {
		t.Run(tc.limit, func(t *testing.T) {
			limit, err := cas.ParseUnusedLimit(tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			s, _ := newStore(t)
			defer s.Close()
			pinned, live := compactFixture(t, s)
			stats, err := cas.GC(ctx, s, &cas.GCOptions{Compact: &cas.CompactOptions{MaxUnused: limit}})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v", stats.CompactStats)
			if !tc.rewritten(stats.PacksRewritten) {
				t.Errorf("%d packs rewritten", stats.PacksRewritten)
			}
			if !tc.unused(stats.UnusedBytes, live) {
				t.Errorf("%d dead bytes left for %d live", stats.UnusedBytes, live)
			}
			getsBack(t, s, pinned)
			checkClean(t, s)
		})
	}
	for _, bad := range []string{"", "-1", "5%%", "x", "1e3", "-5%", "NaN%", "12q", "99999999999999999t"} {
		if _, err := cas.ParseUnusedLimit(bad); !errors.Is(err, cas.ErrInvalid) {
			t.Errorf("ParseUnusedLimit(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

// A pack holding a damaged live block is not rewritten (a copy would
// carry the damage under a new location): it stays as it is, its other
// blocks readable, the others are compacted, and gc fails with an
// integrity error naming the block.
func TestCompactLeavesDamagedPack(t *testing.T) {
	setPackMax(t, 1<<20)
	ctx := context.Background()
	s, dir := newStore(t)
	pinned, _ := compactFixture(t, s)
	s.Close()
	victim := pinned[0]
	corrupt(t, dir, victim.CID(), 10)
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	where := packedAt(t, s, victim)
	// gc reads no raw block to mark, so it gets as far as compaction.
	stats, err := cas.GC(ctx, s, &cas.GCOptions{Compact: &cas.CompactOptions{}})
	if !errors.Is(err, cas.ErrCorrupt) || !strings.Contains(err.Error(), victim.CID().String()) {
		t.Fatalf("compact: %v, want ErrCorrupt naming %s", err, victim.CID())
	}
	if stats.PacksRewritten == 0 {
		t.Error("no other pack was rewritten")
	}
	if got := packedAt(t, s, victim); got != where {
		t.Errorf("the damaged block moved from %+v to %+v", where, got)
	}
	getsBack(t, s, pinned[1:])
}

package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
	bolt "go.etcd.io/bbolt"
)

// destroyIndexLeaves overwrites every leaf page of store.db whose first
// key is a binary CID (the leaves of the blocks bucket, none of the pins
// bucket's, keyed by names), as a disk that lost those pages would, and
// returns how many it destroyed.
func destroyIndexLeaves(t *testing.T, dir string) int {
	t.Helper()
	path := filepath.Join(dir, dbFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pageSize := int(binary.LittleEndian.Uint32(data[16+8:]))
	n := 0
	for p := 2; (p+1)*pageSize <= len(data); p++ {
		page := data[p*pageSize : (p+1)*pageSize]
		if binary.LittleEndian.Uint16(page[8:]) != 0x02 || binary.LittleEndian.Uint16(page[10:]) == 0 {
			continue
		}
		pos := int(binary.LittleEndian.Uint32(page[16+4:]))
		ksize := int(binary.LittleEndian.Uint32(page[16+8:]))
		if ksize != 36 || 16+pos+ksize > pageSize {
			continue
		}
		if _, err := cas.CastCID(page[16+pos : 16+pos+ksize]); err != nil {
			continue
		}
		copy(page, bytes.Repeat([]byte{0xab}, pageSize))
		n++
	}
	if n == 0 {
		t.Fatal("no leaf page of the blocks bucket found")
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return n
}

// allKeys returns every CID the index holds.
func allKeys(t *testing.T, s *Store) []cid.Cid {
	t.Helper()
	var out []cid.Cid
	if err := s.AllKeys(context.Background(), func(c cid.Cid, _ int) error {
		out = append(out, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// repairDestroyed closes s, destroys the leaves of its index, repairs it
// and opens it again.
func repairDestroyed(t *testing.T, s *Store, dir string) (*Store, *RepairReport) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	destroyIndexLeaves(t, dir)
	rep, err := Repair(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kept %d, recovered %d, %d pages lost, orphaned %v", rep.Kept, rep.Recovered, len(rep.Lost), rep.Orphaned)
	s, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, rep
}

// Every leaf of the index destroyed: repair rebuilds every entry from the
// packs' sidecars, every block reads back, every pin is whole, no pack is
// set aside, and the store checks clean.
func TestRepairRebuildsIndexFromSidecars(t *testing.T) {
	setPackMax(t, 1<<20)
	s, dir := newStore(t)
	pinned, _ := compactFixture(t, s)
	// Blocks kept inline: under 128 bytes, and those of a small Put.
	var inline []cas.Block
	for i := range 300 {
		inline = append(inline, cas.NewBlock(cas.Raw, []byte(fmt.Sprintf("tiny block %d", i))))
	}
	inline = append(inline, bigBlock(0x33, 3000), bigBlock(0x34, 200))
	if err := s.Put(context.Background(), inline...); err != nil {
		t.Fatal(err)
	}
	if err := view(s.db, func(tx *bolt.Tx) error {
		for _, b := range inline {
			if e, err := decodeEntry(tx.Bucket(bucketBlocks).Get(b.CID().Bytes())); err != nil || e.packed {
				t.Fatalf("block of %d bytes: packed, or %v", len(b.Data()), err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	before := allKeys(t, s)
	s, rep := repairDestroyed(t, s, dir)
	defer s.Close()
	if len(rep.Lost) == 0 {
		t.Error("the report names no page lost")
	}
	if rep.Recovered == 0 || rep.Kept+rep.Recovered != len(before) {
		t.Errorf("kept %d and recovered %d entries of %d", rep.Kept, rep.Recovered, len(before))
	}
	if len(rep.Orphaned) != 0 {
		t.Errorf("packs set aside: %v", rep.Orphaned)
	}
	if got := allKeys(t, s); len(got) != len(before) {
		t.Errorf("the index holds %d entries after repair, %d before", len(got), len(before))
	}
	getsBack(t, s, pinned)
	getsBack(t, s, inline)
	for _, c := range before {
		if _, err := s.Get(context.Background(), c); err != nil {
			t.Fatalf("after repair: %v", err)
		}
	}
	pins, err := s.Pins(context.Background())
	if err != nil || len(pins) != len(pinned) {
		t.Fatalf("%d pins after repair, want %d (%v)", len(pins), len(pinned), err)
	}
	checkClean(t, s)
}

// After compaction rewrote the packs, the sidecars of the packs it wrote
// give back every live block, and the removed packs left no sidecar.
func TestRepairAfterCompaction(t *testing.T) {
	setPackMax(t, 1<<20)
	ctx := context.Background()
	s, dir := newStore(t)
	pinned, _ := compactFixture(t, s)
	stats, err := cas.GC(ctx, s, &cas.GCOptions{Compact: &cas.CompactOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	if stats.PacksRewritten == 0 {
		t.Fatal("gc rewrote no pack")
	}
	before := allKeys(t, s)
	// Every sidecar belongs to a pack.
	sides, _ := filepath.Glob(filepath.Join(dir, packDir, "*"+sidecarExt))
	for _, sp := range sides {
		if _, err := os.Stat(sp[:len(sp)-len(sidecarExt)] + ".pack"); err != nil {
			t.Errorf("sidecar %s without its pack", filepath.Base(sp))
		}
	}
	if len(sides) != len(packFiles(t, dir)) {
		t.Errorf("%d sidecars for %d packs", len(sides), len(packFiles(t, dir)))
	}
	s, rep := repairDestroyed(t, s, dir)
	defer s.Close()
	if rep.Recovered == 0 || rep.Kept+rep.Recovered != len(before) {
		t.Errorf("kept %d and recovered %d entries of %d", rep.Kept, rep.Recovered, len(before))
	}
	if len(rep.Orphaned) != 0 {
		t.Errorf("packs set aside: %v", rep.Orphaned)
	}
	getsBack(t, s, pinned)
	checkClean(t, s)
}

// Forged records in a sidecar (a stored CID pointing at another block's
// bytes, a CID never stored pointing at a stored block's bytes, offsets
// and lengths past the end, a torn record) recover nothing false: every
// entry repair adds reads back verified, the forged CIDs are absent, and
// the true records after the torn one still count.
func TestRepairIgnoresForgedSidecarRecords(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	var blocks []cas.Block
	for i := range 400 {
		blocks = append(blocks, bigBlock(byte(i), 1000+i)) // 400 KiB: packed
	}
	if err := s.Put(ctx, blocks...); err != nil {
		t.Fatal(err)
	}
	a, b := packedAt(t, s, blocks[0]), packedAt(t, s, blocks[1])
	stranger := bigBlock(0xee, 5000)
	side := filepath.Join(dir, packDir, sidecarName(1))
	orig, err := os.ReadFile(side)
	if err != nil {
		t.Fatal(err)
	}
	size := uint64(0)
	if info, err := os.Stat(filepath.Join(dir, packDir, packName(1))); err == nil {
		size = uint64(info.Size())
	}
	var forged []byte
	forged = appendRecord(forged, blocks[0].CID(), b)                                // blocks[0] at blocks[1]'s bytes
	forged = appendRecord(forged, stranger.CID(), a)                                 // a CID never stored
	forged = appendRecord(forged, stranger.CID(), location{1, size + 10, 5000})      // past the end
	forged = appendRecord(forged, blocks[2].CID(), location{1, size - 100, 1 << 20}) // runs past the end
	forged = appendRecord(forged, blocks[3].CID(), location{1, 1<<64 - 10, 1 << 20}) // offset + length wraps
	torn := appendRecord(nil, blocks[4].CID(), packedAt(t, s, blocks[4]))
	forged = append(forged, torn[:len(torn)-3]...) // torn mid-record
	forged = append(forged, orig...)
	if err := os.WriteFile(side, forged, 0o600); err != nil {
		t.Fatal(err)
	}
	// And in the inline log: a CID with other bytes than its own.
	tiny := cas.NewBlock(cas.Raw, []byte("tiny"))
	if err := s.Put(ctx, tiny); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, packDir, inlineLog)
	inl, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	forgedInline := appendInlineRecord(nil, tiny.CID(), []byte("tinz"))
	forgedInline = appendInlineRecord(forgedInline, stranger.CID(), []byte("tiny"))
	if err := os.WriteFile(log, append(forgedInline, inl...), 0o600); err != nil {
		t.Fatal(err)
	}
	before := allKeys(t, s)
	s, rep := repairDestroyed(t, s, dir)
	defer s.Close()
	if rep.Kept+rep.Recovered != len(before) {
		t.Errorf("kept %d and recovered %d entries of %d", rep.Kept, rep.Recovered, len(before))
	}
	if ok, _ := s.Has(ctx, stranger.CID()); ok {
		t.Error("a forged record made a block that was never stored")
	}
	if got := packedAt(t, s, blocks[0]); got != a {
		t.Errorf("blocks[0] is at %+v after repair, stored at %+v", got, a)
	}
	getsBack(t, s, append(blocks, tiny))
	checkClean(t, s)
}

// A store written before sidecars (none beside its packs) is repaired as
// before: what the readable pages hold is kept, the packs nothing points
// into are set aside, and nothing is recovered.
func TestRepairWithoutSidecars(t *testing.T) {
	setPackMax(t, 1<<20)
	s, dir := newStore(t)
	compactFixture(t, s)
	sides, _ := filepath.Glob(filepath.Join(dir, packDir, "*"+sidecarExt))
	if len(sides) == 0 {
		t.Fatal("no sidecar written")
	}
	for _, sp := range sides {
		if err := os.Remove(sp); err != nil {
			t.Fatal(err)
		}
	}
	s, rep := repairDestroyed(t, s, dir)
	defer s.Close()
	if rep.Recovered != 0 {
		t.Errorf("recovered %d entries with no sidecar", rep.Recovered)
	}
	if len(rep.Orphaned) == 0 {
		t.Error("with every leaf of the index lost, no pack was set aside")
	}
	checkClean(t, s)
}

// gc rewrites the inline log once most of it is of blocks deleted: it
// shrinks to the records of the blocks still stored, and repair still
// rebuilds those.
func TestCompactTrimsInlineLog(t *testing.T) {
	old := inlineLogSlack
	inlineLogSlack = 1 << 10
	t.Cleanup(func() { inlineLogSlack = old })
	ctx := context.Background()
	s, dir := newStore(t)
	var kept []cas.Block
	for i := range 500 {
		b := cas.NewBlock(cas.Raw, []byte(fmt.Sprintf("inline block %d %s", i, bytes.Repeat([]byte{'x'}, 60))))
		if err := s.Put(ctx, b); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			kept = append(kept, b)
			if err := s.SetPin(ctx, fmt.Sprintf("p%d", i), b.CID()); err != nil {
				t.Fatal(err)
			}
		}
	}
	log := filepath.Join(dir, packDir, inlineLog)
	size := func() int64 {
		info, err := os.Stat(log)
		if err != nil {
			t.Fatal(err)
		}
		return info.Size()
	}
	before := size()
	if _, err := cas.GC(ctx, s, nil); err != nil {
		t.Fatal(err)
	}
	after := size()
	if after > before/5 || after == 0 {
		t.Errorf("the inline log went from %d to %d bytes with a tenth of its blocks left", before, after)
	}
	// Puts append to the new log.
	late := cas.NewBlock(cas.Raw, []byte("put after the trim"))
	if err := s.Put(ctx, late); err != nil {
		t.Fatal(err)
	}
	if size() <= after {
		t.Error("a Put after the trim appended nothing to the inline log")
	}
	kept = append(kept, late)
	s, rep := repairDestroyed(t, s, dir)
	defer s.Close()
	getsBack(t, s, kept)
	if got := allKeys(t, s); len(got) != len(kept) {
		t.Errorf("%d entries after repair, %d stored", len(got), len(kept))
	}
	_ = rep
	checkClean(t, s)
}

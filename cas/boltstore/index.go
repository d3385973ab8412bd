package boltstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/haygent/hg/cas"
	bolt "go.etcd.io/bbolt"
)

// The packs bucket counts, for each pack, the blocks that point into it,
// their bytes and the pack's committed end. Those numbers are a cache:
// the index (the blocks bucket) is the truth. Nothing that removes or
// cuts a pack file trusts them: gc's compaction and a writer's recovery
// read the whole index first (scanIndex), in the transaction that
// decides, and remove a pack only if no entry points into it, cut one
// only past the end of the last block that lies in it, and set the counts
// from what they found.

// packUse is what the index says of one pack.
type packUse struct {
	blocks uint64 // entries that point into it
	bytes  uint64 // their lengths, summed
	extent uint64 // the end of the furthest of them: offset + length
}

// badEntry is an entry of the blocks bucket that does not decode.
type badEntry struct {
	key []byte
	err error
}

// what names a bad entry: its CID, or its key in hex if that is no CID.
func (b badEntry) what() string {
	if c, err := cas.CastCID(b.key); err == nil {
		return c.String()
	}
	return fmt.Sprintf("key %x", b.key)
}

// indexScan is one pass over the blocks bucket.
type indexScan struct {
	use     map[uint64]*packUse
	bad     []badEntry // values that do not decode: where they point is unknown
	badKeys [][]byte   // keys that are not CIDs
	entries uint64
	inline  uint64 // bytes of the blocks kept inline
}

// errIndexUnreadable is returned by whatever would remove or cut a pack
// while the index holds an entry that does not decode: such an entry may
// point anywhere, so no pack can be shown free of live blocks.
var errIndexUnreadable = fmt.Errorf("the index holds entries that do not decode, so no pack can be shown unused: %w", cas.ErrCorrupt)

// scanIndex reads every entry of the blocks bucket in tx. visit, if set,
// is called with each packed entry's key (valid only during tx) and
// location.
func scanIndex(ctx context.Context, tx *bolt.Tx, visit func(key []byte, l location)) (*indexScan, error) {
	sc := &indexScan{use: map[uint64]*packUse{}}
	cur := tx.Bucket(bucketBlocks).Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		if sc.entries%4096 == 4095 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		sc.entries++
		if _, err := cas.CastCID(k); err != nil {
			sc.badKeys = append(sc.badKeys, append([]byte(nil), k...))
		}
		e, err := decodeEntry(v)
		if err != nil {
			sc.bad = append(sc.bad, badEntry{append([]byte(nil), k...), err})
			continue
		}
		if !e.packed {
			sc.inline += uint64(len(e.inline))
			continue
		}
		u := sc.use[e.loc.pack]
		if u == nil {
			u = &packUse{}
			sc.use[e.loc.pack] = u
		}
		u.blocks++
		u.bytes += e.loc.length
		u.extent = max(u.extent, e.loc.offset+e.loc.length)
		if visit != nil {
			visit(k, e.loc)
		}
	}
	return sc, nil
}

// decodePackStat decodes a value of the packs bucket.
func decodePackStat(v []byte) (packStat, error) {
	var ps packStat
	for _, p := range []*uint64{&ps.live, &ps.liveBytes, &ps.end} {
		x, k := binary.Uvarint(v)
		if k <= 0 {
			return packStat{}, errors.New("malformed pack counts")
		}
		*p, v = x, v[k:]
	}
	if len(v) != 0 {
		return packStat{}, errors.New("malformed pack counts")
	}
	return ps, nil
}

// allPackStats returns every entry of the packs bucket; a value that does
// not decode reads as zeros and is named in bad.
func allPackStats(tx *bolt.Tx) (stats map[uint64]packStat, bad map[uint64]error) {
	stats, bad = map[uint64]packStat{}, map[uint64]error{}
	_ = tx.Bucket(bucketPacks).ForEach(func(k, v []byte) error {
		if len(k) != 8 {
			return nil
		}
		n := binary.BigEndian.Uint64(k)
		ps, err := decodePackStat(v)
		if err != nil {
			bad[n] = err
		}
		stats[n] = ps
		return nil
	})
	return stats, bad
}

// packFile is a pack file found in the packs directory.
type packFile struct {
	n    uint64
	size int64
}

// listPacks returns the pack files in dir (a store's packs directory),
// none if it does not exist.
func listPacks(dir string) ([]packFile, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []packFile
	for _, de := range ents {
		name, ok := strings.CutSuffix(de.Name(), ".pack")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(name, 10, 64)
		if err != nil || packName(n) != de.Name() {
			continue
		}
		info, err := de.Info()
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, packFile{n, info.Size()})
	}
	return out, nil
}

// reclaim is the part of a plan that gives space back: files to remove
// and files to cut, after the transaction that decided it commits.
type reclaim struct {
	remove []uint64
	cut    map[uint64]uint64 // pack -> new length
}

// settle is what a writer's recovery and gc's compaction both do first,
// inside the write transaction tx: read the whole index, set every pack's
// counts and end from it, and plan the removal of every pack file nothing
// points into and the cut of every file past its last block (the
// current pack, with nothing in it, is cut to nothing and stays current).
// files are the pack files on disk. It changes nothing and returns
// errIndexUnreadable if an entry of the index does not decode.
func settle(ctx context.Context, tx *bolt.Tx, files []packFile) (*indexScan, reclaim, error) {
	rc := reclaim{cut: map[uint64]uint64{}}
	sc, err := scanIndex(ctx, tx, nil)
	if err != nil {
		return nil, rc, err
	}
	if len(sc.bad) > 0 {
		return sc, rc, errIndexUnreadable
	}
	stats, _ := allPackStats(tx)
	size := map[uint64]int64{}
	for _, f := range files {
		size[f.n] = f.size
		if _, ok := stats[f.n]; !ok {
			stats[f.n] = packStat{}
		}
	}
	for n := range sc.use {
		if _, ok := stats[n]; !ok {
			stats[n] = packStat{}
		}
	}
	cur := currentPack(tx)
	for n, ps := range stats {
		u := sc.use[n]
		sz, onDisk := size[n]
		if u == nil {
			if n == cur {
				if ps != (packStat{}) {
					if err := putPackStat(tx, n, packStat{}); err != nil {
						return nil, rc, err
					}
				}
				if onDisk && sz > 0 {
					rc.cut[n] = 0
				}
				continue
			}
			if err := tx.Bucket(bucketPacks).Delete(packKey(n)); err != nil {
				return nil, rc, err
			}
			if onDisk {
				rc.remove = append(rc.remove, n)
			}
			continue
		}
		want := packStat{live: u.blocks, liveBytes: u.bytes, end: u.extent}
		if want != ps {
			if err := putPackStat(tx, n, want); err != nil {
				return nil, rc, err
			}
		}
		if onDisk && uint64(sz) > u.extent {
			rc.cut[n] = u.extent
		}
	}
	return sc, rc, nil
}

// apply removes and cuts the files of rc, after the transaction that
// planned it has committed. A crash part-way leaves files the next
// writer's recovery finds and handles the same way.
func (p *packs) apply(rc reclaim) error {
	for _, n := range rc.remove {
		if err := p.remove(n); err != nil {
			return fmt.Errorf("remove pack %s: %w", packName(n), err)
		}
	}
	for n, end := range rc.cut {
		p.closeDirect(n)
		err := os.Truncate(p.path(n), int64(end))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("cut pack %s: %w", packName(n), err)
		}
		// A sidecar's records past a cut are ignored by repair (their
		// bytes are gone); a pack cut to nothing has none worth keeping.
		if end == 0 {
			err := os.Truncate(p.sidecarPath(n), 0)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("cut pack index %s: %w", sidecarName(n), err)
			}
		}
	}
	return nil
}

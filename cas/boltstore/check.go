package boltstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/haygent/hg/cas"
	bolt "go.etcd.io/bbolt"
)

var _ cas.StoreChecker = (*Store)(nil)

// CheckStore checks what re-hashing the blocks cannot see. First the
// database file itself: every page reachable from its meta page is read
// through plain reads and checked for what would make bbolt fault or
// panic (checkDBFile); if they are sound, bbolt's own consistency check
// (Tx.Check: pages freed twice, reachable and free, neither; keys out of
// order) runs. Then the contents: every entry of the index decodes and is
// keyed by a CID; every pack's counts (blocks and bytes) and committed end
// agree with the index; every pack the index points into is on disk and
// long enough for its last block; every pin and ref holds a CID. It
// returns every problem it finds, in a fixed order (at most maxDBProblems
// of the file's); the error is for a failure to look.
func (s *Store) CheckStore(ctx context.Context) ([]cas.StoreProblem, error) {
	end, err := s.begin(ctx, false)
	if err != nil {
		return nil, err
	}
	defer end()
	var probs []cas.StoreProblem
	add := func(where, format string, args ...any) {
		probs = append(probs, cas.StoreProblem{Where: where, Error: fmt.Sprintf(format, args...)})
	}
	files, err := listPacks(s.packs.dir)
	if err != nil {
		return nil, err
	}
	size := map[uint64]int64{}
	for _, f := range files {
		size[f.n] = f.size
	}
	fileProbs := checkDBFile(s.db.Path(), maxDBProblems)
	for _, p := range fileProbs {
		add(dbFile, "%s", p)
	}
	if len(fileProbs) == 0 {
		err := view(s.db, func(tx *bolt.Tx) error {
			n := 0
			for err := range tx.Check() {
				if n++; n <= maxDBProblems {
					add(dbFile, "bbolt: %v", err)
				}
			}
			return nil
		})
		if err != nil {
			add(dbFile, "%v", err)
		}
	}
	err = view(s.db, func(tx *bolt.Tx) error {
		sc, err := scanIndex(ctx, tx, nil)
		if err != nil {
			return err
		}
		for _, k := range sc.badKeys {
			add(fmt.Sprintf("index key %x", k), "not a CID")
		}
		for _, b := range sc.bad {
			add("index entry "+b.what(), "%v", b.err)
		}
		stats, badStats := allPackStats(tx)
		var nums []uint64
		for n := range stats {
			nums = append(nums, n)
		}
		for n := range sc.use {
			if _, ok := stats[n]; !ok {
				nums = append(nums, n)
			}
		}
		slices.Sort(nums)
		for _, n := range nums {
			where := "pack " + packName(n)
			var u packUse
			if p := sc.use[n]; p != nil {
				u = *p
			}
			ps, counted := stats[n]
			switch {
			case badStats[n] != nil:
				add(where, "its counts do not decode: %v", badStats[n])
			case !counted:
				add(where, "no counts, while the index has %d blocks of %d bytes in it", u.blocks, u.bytes)
			case ps.live != u.blocks || ps.liveBytes != u.bytes:
				add(where, "the counts say %d blocks of %d bytes, the index %d blocks of %d bytes", ps.live, ps.liveBytes, u.blocks, u.bytes)
			}
			if counted && badStats[n] == nil && ps.end < u.extent {
				add(where, "its committed end %d is short of its last block, which ends at %d", ps.end, u.extent)
			}
			if u.blocks == 0 {
				continue
			}
			switch sz, ok := size[n]; {
			case !ok:
				add(where, "missing, while the index has %d blocks in it", u.blocks)
			case uint64(sz) < u.extent:
				add(where, "%d bytes long, while its last block ends at %d", sz, u.extent)
			}
		}
		if v := tx.Bucket(bucketMeta).Get(keyPackCur); v != nil {
			if _, err := strconv.ParseUint(string(v), 10, 64); err != nil {
				add("meta", "the current pack %q is not a number", v)
			}
		}
		_ = tx.Bucket(bucketPins).ForEach(func(k, v []byte) error {
			if _, err := cas.CastCID(v); err != nil {
				add(fmt.Sprintf("pin %q", k), "not a CID: %v", err)
			}
			return nil
		})
		return tx.Bucket(bucketRefs).ForEachBucket(func(ns []byte) error {
			return tx.Bucket(bucketRefs).Bucket(ns).ForEach(func(k, v []byte) error {
				if _, err := cas.CastCID(v); err != nil {
					add(fmt.Sprintf("ref %s/%s", ns, k), "not a CID: %v", err)
				}
				return nil
			})
		})
	})
	if errors.Is(err, ErrDamaged) && len(probs) > 0 {
		// The damage found above stopped the rest: say so, and give
		// what was found.
		add(dbFile, "the check of the index stopped: %v", err)
		return probs, nil
	}
	if err != nil {
		return nil, err
	}
	return probs, nil
}

// maxDBProblems bounds the problems CheckStore lists from the database
// file: a file of zeros has one per page.
const maxDBProblems = 100

package boltstore

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"github.com/haygent/hg/cas"
	bolt "go.etcd.io/bbolt"
)

var _ cas.Compacter = (*Store)(nil)

// compactBatch bounds the live bytes one step of compaction copies: about
// what the disk needs free for a step, since a step's old packs go as
// soon as it commits. Tests lower it.
var compactBatch uint64 = 256 << 20

// compactHook, when set (by tests), is called at the named points of a
// compaction: "copied" (the copies synced, the index not switched yet),
// "switched" (committed, old packs not removed yet), "removed" (the
// first old pack removed) and "punched" (a step out of space, dead
// ranges given back in place).
var compactHook func(point string)

func hook(point string) {
	if compactHook != nil {
		compactHook(point)
	}
}

// Compact gives the space of deleted blocks back to the file system, as
// restic's prune does for its packs:
//
//  1. In one write transaction it reads the whole index, sets every
//     pack's counts from it, and drops the packs nothing points into;
//     after the commit it removes their files and cuts every other pack
//     after its last block.
//  2. If the dead bytes left inside packs are over opts.MaxUnused, it
//     picks the packs with the largest share of dead bytes until what
//     would be left is within the bound, and rewrites them in steps of at
//     most compactBatch live bytes: it copies their live blocks (each
//     verified against its CID on the way) to the end of the current pack
//     and new ones, syncs them, then in one write transaction reads the
//     index again, checks that every entry it moves still points where it
//     was read and that no entry is left in the old packs, switches the
//     entries and the counts, and commits; then it removes the old files.
//
// The index decides, never the counts: an entry of the index that does
// not decode (it could point anywhere) stops Compact before it changes
// anything, with an error wrapping [cas.ErrCorrupt]. A pack holding a
// block that fails verification is left as it is, and Compact goes on
// with the others and then returns an error wrapping [cas.ErrCorrupt]
// that names the block.
//
// A crash at any point loses nothing: copies are written past the end the
// index knows of and the old files are removed only after the commit, and
// the next writer's recovery cuts or removes what is left over, again
// from the index. On a full disk, a step whose copies do not fit is
// undone; on Linux the dead ranges of the packs left to rewrite are then
// given back in place (punched out) and the step is tried once more. What
// still does not fit is left for a later gc (CompactStats.Postponed), and
// Compact succeeds with what it freed.
//
// Compact moves blocks between files and removes files: no read of the
// same Store may run beside it (other processes are kept out by the
// store's lock; gc and a refused import, its callers, read nothing
// meanwhile).
func (s *Store) Compact(ctx context.Context, opts *cas.CompactOptions) (st cas.CompactStats, err error) {
	if opts == nil {
		opts = &cas.CompactOptions{MaxUnused: cas.DefaultMaxUnused}
	}
	end, err := s.begin(ctx, true)
	if err != nil {
		return st, err
	}
	defer end()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	before := s.diskUsage()
	defer func() {
		st.DiskBytes = s.diskUsage()
		st.DiskFreedBytes = max(0, before-st.DiskBytes)
		_ = view(s.db, func(tx *bolt.Tx) error {
			stats, _ := allPackStats(tx)
			st.UnusedBytes = 0
			for _, ps := range stats {
				st.UnusedBytes += int64(ps.end - min(ps.end, ps.liveBytes))
			}
			return nil
		})
	}()
	files, err := listPacks(s.packs.dir)
	if err != nil {
		return st, fmt.Errorf("compact %s: %w", s.dir, err)
	}
	var (
		rc  reclaim
		sc  *indexScan
		cur uint64
	)
	err = update(s.db, func(tx *bolt.Tx) error {
		var err error
		sc, rc, err = settle(ctx, tx, files)
		cur = currentPack(tx)
		return err
	})
	if errors.Is(err, errIndexUnreadable) {
		return st, fmt.Errorf("compact %s: %w (run 'hg fsck' to list them)", s.dir, err)
	}
	if err != nil {
		return st, fmt.Errorf("compact %s: %w", s.dir, err)
	}
	if err := s.packs.apply(rc); err != nil {
		return st, fmt.Errorf("compact %s: %w", s.dir, err)
	}
	st.PacksRemoved = len(rc.remove)
	// Best effort: an inline log left as it is loses nothing.
	_ = s.trimInlineLog(ctx)

	// What to rewrite: the packs with the most dead bytes for their size
	// first, until the dead bytes left are within the bound.
	var live, unused int64
	type cand struct {
		n            uint64
		live, unused uint64
	}
	var cands []cand
	highest := cur
	for n, u := range sc.use {
		live += int64(u.bytes)
		unused += int64(u.extent - u.bytes)
		highest = max(highest, n)
		if u.extent > u.bytes {
			cands = append(cands, cand{n, u.bytes, u.extent - u.bytes})
		}
	}
	for _, f := range files {
		highest = max(highest, f.n)
	}
	limit := opts.MaxUnused.Of(live)
	if limit < 0 || unused <= limit {
		return st, nil
	}
	slices.SortFunc(cands, func(a, b cand) int {
		// a.unused/(a.live+a.unused) > b.unused/(b.live+b.unused), exactly
		if c := cmp.Compare(b.unused*(a.live+a.unused), a.unused*(b.live+b.unused)); c != 0 {
			return c
		}
		return cmp.Compare(a.n, b.n)
	})
	chosen := map[uint64]bool{}
	left := unused
	for _, c := range cands {
		if left <= limit {
			break
		}
		chosen[c.n] = true
		left -= int64(c.unused)
	}
	entries, err := s.entriesOf(ctx, chosen)
	if err != nil {
		return st, fmt.Errorf("compact %s: %w", s.dir, err)
	}
	// Cheapest copies first: on a tight disk, each step frees room for
	// the next.
	order := make([]uint64, 0, len(chosen))
	for n := range chosen {
		order = append(order, n)
	}
	slices.SortFunc(order, func(a, b uint64) int {
		return cmp.Or(cmp.Compare(sc.use[a].bytes, sc.use[b].bytes), cmp.Compare(a, b))
	})
	// The copies go to the end of the current pack, unless it is being
	// rewritten itself; then to new packs after every existing one.
	target := cur
	if chosen[cur] {
		highest++
		target = highest
	}
	next := func() uint64 { highest++; return highest }
	var damaged []error
	punched := false
	for len(order) > 0 {
		var batch []uint64
		var size uint64
		for len(order) > 0 && (len(batch) == 0 || size+sc.use[order[0]].bytes <= compactBatch) {
			size += sc.use[order[0]].bytes
			batch = append(batch, order[0])
			order = order[1:]
		}
		step, err := s.rewrite(ctx, batch, entries, target, next)
		if isNoSpace(err) && !punched {
			// Give the dead ranges of every pack still to rewrite back in
			// place, then try this step once more.
			punched = true
			s.punchDead(append(batch, order...), entries)
			hook("punched")
			step, err = s.rewrite(ctx, batch, entries, target, next)
		}
		if isNoSpace(err) {
			st.Postponed += len(batch) + len(order)
			break
		}
		if err != nil {
			return st, fmt.Errorf("compact %s: %w", s.dir, err)
		}
		damaged = append(damaged, step.damaged...)
		target = step.target
		st.PacksRewritten += len(step.sources)
		st.CopiedBytes += step.copied
	}
	if len(damaged) > 0 {
		return st, fmt.Errorf("compact %s: packs holding damaged blocks were left as they are: %w", s.dir, errors.Join(damaged...))
	}
	return st, nil
}

// isNoSpace reports whether err is a file system out of space (or of
// quota).
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// packEntry is an index entry that points into a pack being rewritten.
type packEntry struct {
	key []byte
	loc location
}

// entriesOf returns the entries of the index that point into the packs of
// chosen, by pack, in the order of their offsets.
func (s *Store) entriesOf(ctx context.Context, chosen map[uint64]bool) (map[uint64][]packEntry, error) {
	out := map[uint64][]packEntry{}
	err := view(s.db, func(tx *bolt.Tx) error {
		_, err := scanIndex(ctx, tx, func(k []byte, l location) {
			if chosen[l.pack] {
				out[l.pack] = append(out[l.pack], packEntry{bytes.Clone(k), l})
			}
		})
		return err
	})
	for _, es := range out {
		slices.SortFunc(es, func(a, b packEntry) int { return cmp.Compare(a.loc.offset, b.loc.offset) })
	}
	return out, err
}

// rewriteStep is what one step of compaction did.
type rewriteStep struct {
	sources []uint64 // packs emptied and removed
	target  uint64   // the current pack afterwards
	copied  int64
	damaged []error
}

// rewrite copies the live blocks of the packs in batch to target and
// packs after it, switches the index to the copies in one transaction,
// and removes the emptied packs. A pack holding a block that fails
// verification stays as it is (named in damaged). On an error, whatever
// was written is cut off again and the index is unchanged.
func (s *Store) rewrite(ctx context.Context, batch []uint64, entries map[uint64][]packEntry, target uint64, next func() uint64) (rewriteStep, error) {
	step := rewriteStep{target: target}
	var committed packStat
	if err := view(s.db, func(tx *bolt.Tx) error {
		committed, _ = getPackStat(tx, target)
		return nil
	}); err != nil {
		return step, err
	}
	w := s.packs.newPackWriter(target, committed, func(uint64) (uint64, packStat) { return next(), packStat{} })
	type move struct {
		key      []byte
		from, to location
	}
	var moves []move
	buf := getReadBuf()
	defer func() { putReadBuf(buf) }()
	for _, n := range batch {
		var mine []move
		ok := true
		for i, e := range entries[n] {
			if i%ctxCheckEvery == ctxCheckEvery-1 {
				if err := ctx.Err(); err != nil {
					w.undo()
					return step, err
				}
			}
			c, err := cas.CastCID(e.key)
			if err != nil {
				w.undo()
				return step, fmt.Errorf("index key %x: %w", e.key, err)
			}
			data, err := s.packs.read(e.loc, buf)
			if err == nil {
				buf = data
				err = cas.Verify(c, data)
			}
			if err != nil {
				step.damaged = append(step.damaged, fmt.Errorf("pack %s: block %s: %w", packName(n), c, err))
				ok = false
				break
			}
			to, err := w.write(c, data)
			if err != nil {
				w.undo()
				return step, err
			}
			mine = append(mine, move{e.key, e.loc, to})
		}
		if ok {
			moves = append(moves, mine...)
			step.sources = append(step.sources, n)
		}
	}
	if len(step.sources) == 0 {
		w.undo()
		return step, nil
	}
	if err := w.finish(); err != nil {
		w.undo()
		return step, err
	}
	hook("copied")
	sources := map[uint64]bool{}
	for _, n := range step.sources {
		sources[n] = true
	}
	err := update(s.db, func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketBlocks)
		for _, m := range moves {
			if !bytes.Equal(bk.Get(m.key), m.from.encode()) {
				return fmt.Errorf("index entry %x changed while its pack was rewritten", m.key)
			}
			if err := bk.Put(m.key, m.to.encode()); err != nil {
				return err
			}
		}
		// From the index itself: nothing may point into a pack about to
		// be removed.
		sc, err := scanIndex(ctx, tx, nil)
		if err != nil {
			return err
		}
		if len(sc.bad) > 0 {
			return errIndexUnreadable
		}
		for n := range sources {
			if u := sc.use[n]; u != nil {
				return fmt.Errorf("pack %s still holds %d blocks after its rewrite", packName(n), u.blocks)
			}
			if err := tx.Bucket(bucketPacks).Delete(packKey(n)); err != nil {
				return err
			}
		}
		for n := range w.stats {
			u := sc.use[n]
			if u == nil {
				continue // a pack begun but left empty: recovery removes it
			}
			ps := packStat{live: u.blocks, liveBytes: u.bytes, end: w.stats[n].end}
			if err := putPackStat(tx, n, ps); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(keyPackCur, []byte(strconv.FormatUint(w.n, 10)))
	})
	if err != nil {
		w.undo()
		return step, err
	}
	hook("switched")
	step.target = w.n
	for _, m := range moves {
		step.copied += int64(m.to.length)
	}
	for i, n := range step.sources {
		if err := s.packs.remove(n); err != nil {
			return step, fmt.Errorf("remove pack %s: %w", packName(n), err)
		}
		if i == 0 {
			hook("removed")
		}
	}
	return step, nil
}

// punchDead gives back in place the dead ranges of the packs given: the
// space between their live blocks, which entries lists. It changes no
// offset and no entry, so it needs no space and no transaction; where
// the system cannot do it, nothing happens.
func (s *Store) punchDead(packs []uint64, entries map[uint64][]packEntry) {
	for _, n := range packs {
		f, err := s.packs.file(n, false)
		if err != nil {
			continue
		}
		var at uint64
		for _, e := range entries[n] {
			if e.loc.offset >= at+directAlign {
				if punchHole(f, int64(at), int64(e.loc.offset-at)) != nil {
					break
				}
			}
			at = max(at, e.loc.offset+e.loc.length)
		}
	}
}

// diskUsage is what the store's database and packs take on disk.
func (s *Store) diskUsage() int64 {
	var n int64
	if info, err := os.Stat(filepath.Join(s.dir, dbFile)); err == nil {
		n += diskBytes(info)
	}
	ents, _ := os.ReadDir(s.packs.dir)
	for _, de := range ents {
		if info, err := de.Info(); err == nil && info.Mode().IsRegular() {
			n += diskBytes(info)
		}
	}
	return n
}

package boltstore

import (
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/ipfs/go-cid"
	bolt "go.etcd.io/bbolt"
)

// writeBufs holds the buffers a Put gathers small blocks in, across
// Stores: a scheduler opens the store for each commit, and a buffer kept
// by one Store was made anew, doubling as it grew, by every commit.
var writeBufs sync.Pool // of *[]byte

// writeBufMax bounds the buffer a Put gathers small blocks in: a bigger
// batch is written in several calls, rather than copied whole into fresh
// memory first.
const writeBufMax = 4 << 20

// getWriteBuf returns an empty buffer that holds n bytes.
func getWriteBuf(n int) []byte {
	if p, ok := writeBufs.Get().(*[]byte); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]byte, 0, n)
}

// putWriteBuf keeps buf for a later Put, unless it is very large.
func putWriteBuf(buf []byte) {
	if cap(buf) <= writeBufMax {
		buf = buf[:0]
		writeBufs.Put(&buf)
	}
}

// packWriter writes blocks to the packs, from the end of one pack on,
// moving to the next as each fills: small blocks (under packBuffered)
// gathered in a buffer and written with one call, large ones each with a
// call of its own, past the page cache where the file system allows it
// (direct.go). Put and compaction write through it. It keeps the counts
// of every pack it reaches, and the sidecar records of the blocks it
// writes, appended beside each pack as the pack fills and at finish.
type packWriter struct {
	p        *packs
	first    uint64 // the pack it began in
	firstEnd uint64 // and that pack's committed end then
	n        uint64 // the pack being written
	end      uint64 // where its next block goes
	f        *os.File
	next     func(full uint64) (uint64, packStat) // the pack after full, and its counts
	stats    map[uint64]packStat                  // every pack reached: its counts, moved on by each block written
	fresh    []uint64                             // packs begun after the first
	files    []*os.File                           // the packs written, to sync
	buf      []byte                               // small blocks gathered, to be written at bufAt
	bufAt    uint64
	bufMax   int    // what buf holds at most before it is written
	scratch  []byte // aligned copies for direct writes
	recs     []byte // the sidecar records of the blocks written to n
}

// newPackWriter returns a writer that begins at the committed end of
// pack n, whose committed counts are committed, and goes on to the packs
// next returns.
func (p *packs) newPackWriter(n uint64, committed packStat, next func(full uint64) (uint64, packStat)) *packWriter {
	return &packWriter{p: p, first: n, firstEnd: committed.end, n: n, end: committed.end, next: next,
		stats: map[uint64]packStat{n: committed}, bufMax: writeBufMax}
}

// flushRecords appends the sidecar records gathered for pack n.
func (w *packWriter) flushRecords() error {
	err := w.p.appendSidecar(w.n, w.recs)
	w.recs = w.recs[:0]
	return err
}

func (w *packWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.f.WriteAt(w.buf, int64(w.bufAt))
	w.buf = w.buf[:0]
	if err != nil {
		return fmt.Errorf("write pack %s: %w", packName(w.n), err)
	}
	return nil
}

// write appends the block c, data, and returns where it lies. Its bytes
// reach the pack before the transaction that points at them commits: a
// writer that dies leaves bytes past the committed end, which the next
// writer's recovery cuts off.
func (w *packWriter) write(c cid.Cid, data []byte) (location, error) {
	if w.end >= packMax {
		if err := w.flush(); err != nil {
			return location{}, err
		}
		if err := w.flushRecords(); err != nil {
			return location{}, err
		}
		w.p.closeDirect(w.n) // full: no more writes to it
		w.p.closeSidecar(w.n)
		var ps packStat
		w.n, ps = w.next(w.n)
		w.f, w.end = nil, ps.end
		w.fresh = append(w.fresh, w.n)
		w.stats[w.n] = ps
	}
	if w.f == nil {
		f, err := w.p.file(w.n, true)
		if err != nil {
			return location{}, err
		}
		w.f = f
		w.files = append(w.files, f)
		// Never below what the file holds: the counts are a cache, and
		// a committed end written short of the last block would have
		// this writer write over it.
		if info, err := f.Stat(); err == nil && uint64(info.Size()) > w.end {
			w.end = uint64(info.Size())
		}
	}
	// The block lies at off and takes span bytes of the pack (a large
	// block written directly is aligned and padded).
	off, span := w.end, uint64(len(data))
	if len(data) < packBuffered {
		if len(w.buf) > 0 && len(w.buf)+len(data) > w.bufMax {
			if err := w.flush(); err != nil {
				return location{}, err
			}
		}
		if len(w.buf) == 0 {
			w.bufAt = w.end
		}
		w.buf = append(w.buf, data...)
	} else {
		if err := w.flush(); err != nil {
			return location{}, err
		}
		var err error
		if off, span, err = w.writeLarge(data); err != nil {
			return location{}, fmt.Errorf("write pack %s: %w", packName(w.n), err)
		}
	}
	w.end = off + span
	l := location{pack: w.n, offset: off, length: uint64(len(data))}
	ps := w.stats[w.n]
	ps.end = w.end
	ps.live++
	ps.liveBytes += l.length
	w.stats[w.n] = ps
	w.recs = appendRecord(w.recs, c, l)
	return l, nil
}

// writeLarge writes a block of packBuffered bytes or more at the end of
// pack n. It returns where the block lies and how many bytes of the pack
// it takes: past the page cache when it can, at the next aligned offset
// and padded (direct.go); through the pack's file at its end otherwise.
func (w *packWriter) writeLarge(data []byte) (off, span uint64, err error) {
	if len(data) >= directMin {
		if df := w.p.directFile(w.n); df != nil {
			off := alignUp(w.end)
			span, err := writeDirect(df, data, off, &w.scratch)
			if err == nil {
				return off, span, nil
			}
			if !refusesDirect(err) {
				return 0, 0, err
			}
			w.p.disableDirect() // refused: through the page cache from now on
		}
	}
	if _, err := w.f.WriteAt(data, int64(w.end)); err != nil {
		return 0, 0, err
	}
	return w.end, uint64(len(data)), nil
}

// finish writes what is gathered and syncs every pack written.
func (w *packWriter) finish() error {
	if err := w.flush(); err != nil {
		return err
	}
	if err := w.flushRecords(); err != nil {
		return err
	}
	for _, f := range w.files {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync pack: %w", err)
		}
	}
	return nil
}

// saveCounts writes in tx the counts of every pack reached, and that the
// pack being written is the one being filled.
func (w *packWriter) saveCounts(tx *bolt.Tx) error {
	for n, ps := range w.stats {
		if err := putPackStat(tx, n, ps); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketMeta).Put(keyPackCur, []byte(strconv.FormatUint(w.n, 10)))
}

// undo cuts the pack it began in back to its committed end and removes
// the packs it began; what it cannot undo, the next writer's recovery
// does, from the index.
func (w *packWriter) undo() {
	w.buf = w.buf[:0]
	w.recs = w.recs[:0]
	for _, n := range w.fresh {
		_ = w.p.remove(n)
	}
	w.p.closeDirect(w.first)
	if info, err := os.Stat(w.p.path(w.first)); err == nil && uint64(info.Size()) > w.firstEnd {
		_ = os.Truncate(w.p.path(w.first), int64(w.firstEnd))
	}
}

package boltstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// Large blocks live in pack files beside the database; the blocks bucket
// holds, for each CID, either the block itself or where it lies in a pack.
//
// Appending a large block to a pack file writes each byte once, where
// bbolt would rewrite a whole leaf of its tree at every commit, and
// reading it with pread into a reused buffer keeps the resident set flat.
// Small blocks go to packs too, so that the tree holds a location of a
// dozen bytes for each instead of its bytes, and stays small. Blocks too
// small to be worth a location stay inline, and so do the small blocks of
// a Put too small to be worth a pack fsync (a single invocation's ledger).
// What keeping them inline cost: docs/performance.md, "The on-disk store:
// measured and not kept".
const (
	// packMin is the smallest block stored in a pack file.
	packMin = 128
	// packBuffered: blocks below this size are gathered and written to
	// the pack with one call per Put.
	packBuffered = 64 << 10
	// packSmallMin: a Put packs its small blocks (packMin to
	// packBuffered) only when they add up to this much; fewer stay
	// inline, sparing a small Put the pack's fsync.
	packSmallMin = 256 << 10
	packDir      = "packs"
)

// packMax is the size at which a pack file is closed and a new one
// started, so gc can drop whole files. Tests lower it.
var packMax uint64 = 256 << 20

// Entry tags: the first byte of every value in the blocks bucket.
const (
	tagInline = 0x00 // the block's bytes follow
	tagPacked = 0x01 // uvarint pack number, uvarint offset, uvarint length
)

var (
	bucketPacks = []byte("packs") // pack number (8 bytes BE) -> live count, live bytes, end (uvarints)
	keyPackCur  = []byte("pack")  // in meta: the number of the pack being filled
)

// location is where a packed block lies.
type location struct {
	pack   uint64
	offset uint64
	length uint64
}

func (l location) encode() []byte {
	b := make([]byte, 1, 1+3*binary.MaxVarintLen64)
	b[0] = tagPacked
	b = binary.AppendUvarint(b, l.pack)
	b = binary.AppendUvarint(b, l.offset)
	return binary.AppendUvarint(b, l.length)
}

// entry is a decoded value of the blocks bucket: inline bytes (valid only
// during the transaction) or a location.
type entry struct {
	inline []byte
	loc    location
	packed bool
}

var errBadEntry = errors.New("malformed entry in the blocks bucket")

func decodeEntry(v []byte) (entry, error) {
	if len(v) == 0 {
		return entry{}, errBadEntry
	}
	switch v[0] {
	case tagInline:
		return entry{inline: v[1:]}, nil
	case tagPacked:
		var l location
		rest := v[1:]
		for _, p := range []*uint64{&l.pack, &l.offset, &l.length} {
			x, n := binary.Uvarint(rest)
			if n <= 0 {
				return entry{}, errBadEntry
			}
			*p, rest = x, rest[n:]
		}
		if len(rest) != 0 {
			return entry{}, errBadEntry
		}
		return entry{loc: l, packed: true}, nil
	}
	return entry{}, errBadEntry
}

// size is the length of the block an entry stands for.
func (e entry) size() int {
	if e.packed {
		return int(e.loc.length)
	}
	return len(e.inline)
}

func inlineValue(data []byte) []byte {
	v := make([]byte, 1+len(data))
	copy(v[1:], data)
	return v
}

// packStat is the bookkeeping of one pack file.
type packStat struct {
	live      uint64 // blocks that point into it
	liveBytes uint64
	end       uint64 // committed length of the file
}

func packKey(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// getPackStat returns pack n's counts, and whether the packs bucket has
// an entry for it; a value that does not decode reads as zeros.
func getPackStat(tx *bolt.Tx, n uint64) (packStat, bool) {
	v := tx.Bucket(bucketPacks).Get(packKey(n))
	if v == nil {
		return packStat{}, false
	}
	ps, _ := decodePackStat(v)
	return ps, true
}

func putPackStat(tx *bolt.Tx, n uint64, ps packStat) error {
	b := make([]byte, 0, 3*binary.MaxVarintLen64)
	b = binary.AppendUvarint(b, ps.live)
	b = binary.AppendUvarint(b, ps.liveBytes)
	b = binary.AppendUvarint(b, ps.end)
	return tx.Bucket(bucketPacks).Put(packKey(n), b)
}

func currentPack(tx *bolt.Tx) uint64 {
	n, _ := strconv.ParseUint(string(tx.Bucket(bucketMeta).Get(keyPackCur)), 10, 64)
	if n == 0 {
		return 1
	}
	return n
}

func packName(n uint64) string { return fmt.Sprintf("%08d.pack", n) }

// packs holds the open pack files of a store.
type packs struct {
	dir      string // the store's packs directory
	readOnly bool

	mu       sync.Mutex
	files    map[uint64]*os.File
	direct   map[uint64]*os.File // packs opened for direct writes (direct.go)
	sidecars map[uint64]*os.File // sidecars opened for appending (sidecar.go)
	inline   *os.File            // the inline log, opened for appending
	noDirect bool                // the file system refused them
}

func newPacks(storeDir string, readOnly bool) *packs {
	return &packs{dir: filepath.Join(storeDir, packDir), readOnly: readOnly, files: map[uint64]*os.File{}}
}

// file returns the open pack n, opening (and, for a writer, creating) it.
func (p *packs) file(n uint64, create bool) (*os.File, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f, ok := p.files[n]; ok {
		return f, nil
	}
	flag := os.O_RDONLY
	if !p.readOnly {
		flag = os.O_RDWR
		if create {
			if err := os.MkdirAll(p.dir, 0o700); err != nil {
				return nil, err
			}
			flag |= os.O_CREATE
		}
	}
	f, err := os.OpenFile(filepath.Join(p.dir, packName(n)), flag, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open pack: %w", err)
	}
	p.files[n] = f
	return f, nil
}

// read reads a packed block into buf (grown as needed) and returns it.
func (p *packs) read(l location, buf []byte) ([]byte, error) {
	f, err := p.file(l.pack, false)
	if err != nil {
		return nil, err
	}
	if uint64(cap(buf)) < l.length {
		buf = make([]byte, l.length)
	}
	buf = buf[:l.length]
	if _, err := f.ReadAt(buf, int64(l.offset)); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("pack %s ends before offset %d+%d", packName(l.pack), l.offset, l.length)
		}
		return nil, err
	}
	return buf, nil
}

// remove closes and deletes pack n and its sidecar (the sidecar first:
// a crash between the two leaves a pack file, which recovery removes, not
// a sidecar alone).
func (p *packs) remove(n uint64) error {
	p.mu.Lock()
	for _, files := range []map[uint64]*os.File{p.files, p.direct, p.sidecars} {
		if f, ok := files[n]; ok {
			f.Close()
			delete(files, n)
		}
	}
	p.mu.Unlock()
	if err := os.Remove(p.sidecarPath(n)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	err := os.Remove(filepath.Join(p.dir, packName(n)))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

func (p *packs) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var first error
	for _, files := range []map[uint64]*os.File{p.files, p.direct, p.sidecars} {
		for n, f := range files {
			if err := f.Close(); err != nil && first == nil {
				first = err
			}
			delete(files, n)
		}
	}
	if p.inline != nil {
		if err := p.inline.Close(); err != nil && first == nil {
			first = err
		}
		p.inline = nil
	}
	return first
}

// path returns the file name of pack n.
func (p *packs) path(n uint64) string { return filepath.Join(p.dir, packName(n)) }

// recover runs when a writer opens the store. A Put that died leaves
// bytes past its pack's committed end, or a new pack file nothing points
// into; gc that died leaves packs nothing points into any more. When the
// files and the counts show any of that, recover reads the whole index
// (settle) and, from what it says alone, sets the counts, removes the
// files no entry points into and cuts the others after their last block.
// If the index cannot be read whole, it removes and cuts nothing.
//
// When the counts cannot be written (a full disk), it still removes the
// files no entry points into and cuts files past both their committed end
// and their last block, which needs no new space.
func (p *packs) recover(db *bolt.DB) error {
	files, err := listPacks(p.dir)
	if err != nil || len(files) == 0 {
		return err
	}
	need := false
	err = view(db, func(tx *bolt.Tx) error {
		cur := currentPack(tx)
		for _, f := range files {
			ps, ok := getPackStat(tx, f.n)
			if !ok || uint64(f.size) > ps.end || ps.live == 0 && (f.n != cur || f.size > 0) {
				need = true
			}
		}
		return nil
	})
	if err != nil || !need {
		return err
	}
	var rc reclaim
	err = update(db, func(tx *bolt.Tx) error {
		var err error
		_, rc, err = settle(context.Background(), tx, files)
		return err
	})
	switch {
	case err == nil:
		return p.apply(rc)
	case errors.Is(err, errIndexUnreadable), errors.Is(err, ErrDamaged):
		return nil // fsck names the damage; nothing is removed or cut
	}
	// The counts could not be written: give back what needs no write.
	rc = reclaim{cut: map[uint64]uint64{}}
	verr := view(db, func(tx *bolt.Tx) error {
		sc, err := scanIndex(context.Background(), tx, nil)
		if err != nil || len(sc.bad) > 0 {
			return errIndexUnreadable
		}
		cur := currentPack(tx)
		for _, f := range files {
			ps, _ := getPackStat(tx, f.n)
			u := sc.use[f.n]
			switch {
			case u == nil && f.n != cur:
				rc.remove = append(rc.remove, f.n)
			case u == nil:
				if uint64(f.size) > ps.end {
					rc.cut[f.n] = ps.end
				}
			case uint64(f.size) > max(ps.end, u.extent):
				rc.cut[f.n] = max(ps.end, u.extent)
			}
		}
		return nil
	})
	if verr != nil {
		return nil
	}
	return p.apply(rc)
}

package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
	bolt "go.etcd.io/bbolt"
)

// scanBatch is how many keys AllKeys reads in one read transaction.
const scanBatch = 1000

// ctxCheckEvery is how many blocks Put and Delete handle between two
// checks of the context.
const ctxCheckEvery = 256

// Has reports whether the block is stored, without reading or verifying
// it.
func (s *Store) Has(ctx context.Context, c cid.Cid) (bool, error) {
	end, err := s.begin(ctx, false)
	if err != nil {
		return false, err
	}
	defer end()
	var ok bool
	err = view(s.db, func(tx *bolt.Tx) error {
		ok = tx.Bucket(bucketBlocks).Get(c.Bytes()) != nil
		return nil
	})
	return ok, err
}

// Get returns a verified copy of the block's bytes: a [*cas.NotFoundError]
// if it is missing, a [*cas.CorruptError] if its bytes do not hash to c.
func (s *Store) Get(ctx context.Context, c cid.Cid) ([]byte, error) {
	var out []byte
	err := s.View(ctx, c, func(data []byte) error {
		out = bytes.Clone(data)
		if out == nil {
			out = []byte{}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// View calls fn with the block's verified bytes, in place in the memory
// map of the database: they are valid only until fn returns and must not
// be modified (the mapping is read-only: writing faults). A missing block
// is a [*cas.NotFoundError], a corrupt one a [*cas.CorruptError]; fn is
// not called then. Otherwise View returns fn's error.
//
// A read transaction is open while fn runs, and a write that has to grow
// the database file waits for every open one. So fn must not call the
// store's methods, nor wait for another goroutine that writes to it: a
// write would wait for fn forever, and a nested read can queue behind a
// waiting write. Code that needs the store while it holds a block's bytes
// should copy them with [Store.Get].
func (s *Store) View(ctx context.Context, c cid.Cid, fn func(data []byte) error) error {
	end, err := s.begin(ctx, false)
	if err != nil {
		return err
	}
	defer end()
	var (
		loc    location
		packed bool
	)
	err = view(s.db, func(tx *bolt.Tx) error {
		e, _, err := lookup(tx, c)
		if err != nil {
			return err
		}
		if e.packed {
			loc, packed = e.loc, true
			return nil
		}
		if err := cas.Verify(c, e.inline); err != nil {
			return err
		}
		return fn(e.inline)
	})
	if err != nil || !packed {
		return err
	}
	buf := getReadBuf()
	data, err := s.packs.read(loc, buf)
	if err != nil {
		return fmt.Errorf("block %s: %w", c, err)
	}
	defer putReadBuf(data)
	if err := cas.Verify(c, data); err != nil {
		return err
	}
	return fn(data)
}

// lookup returns the index entry of c, and its value in the database,
// valid only during tx. A missing block is a [*cas.NotFoundError].
func lookup(tx *bolt.Tx, c cid.Cid) (entry, []byte, error) {
	v := tx.Bucket(bucketBlocks).Get(c.Bytes())
	if v == nil {
		return entry{}, nil, &cas.NotFoundError{CID: c}
	}
	e, err := decodeEntry(v)
	if err != nil {
		return entry{}, nil, fmt.Errorf("block %s: %w", c, err)
	}
	return e, v, nil
}

// Extent is where a stored block's bytes lie on disk: Length bytes at
// Offset in File.
type Extent struct {
	// File is the path of a pack file (the store directory joined with
	// packs/NNNNNNNN.pack), or of the database file, store.db, for a
	// block kept inline.
	File   string
	Offset int64
	Length int64
	// Inline tells that the block is kept inline, in a page of the
	// database; it lies there only until the next write to the store,
	// which may copy the page elsewhere.
	Inline bool
}

// Locate reports where the block c lies on disk, for tools and tests
// that look at the files themselves (a test damages a block there as a
// failing disk would). It reads the index alone: it neither reads nor
// verifies the block. A missing block is a [*cas.NotFoundError].
func (s *Store) Locate(ctx context.Context, c cid.Cid) (Extent, error) {
	end, err := s.begin(ctx, false)
	if err != nil {
		return Extent{}, err
	}
	defer end()
	var ext Extent
	err = view(s.db, func(tx *bolt.Tx) error {
		e, v, err := lookup(tx, c)
		if err != nil {
			return err
		}
		if e.packed {
			ext = Extent{File: s.packs.path(e.loc.pack), Offset: int64(e.loc.offset), Length: int64(e.loc.length)}
			return nil
		}
		// Where the tree in the file holds the entry: its pages stay
		// put while this transaction is open.
		off, err := dbValueAt(s.db.Path(), [][]byte{bucketBlocks}, c.Bytes(), v)
		if err != nil {
			return fmt.Errorf("block %s: %w", c, err)
		}
		ext = Extent{File: s.db.Path(), Offset: off + 1, Length: int64(len(e.inline)), Inline: true}
		return nil
	})
	return ext, err
}

// errNothingNew rolls back a Put whose blocks were all present already,
// so that it costs no commit and no sync.
var errNothingNew = errors.New("nothing new")

// readBufs recycles the buffers packed blocks are read into, so reading a
// large file touches the same few MiB of memory again and again. (A
// sync.Pool loses its buffers at every garbage collection, and faulting
// in fresh pages costs more than the reads.)
var readBufs = make(chan []byte, 16)

func getReadBuf() []byte {
	select {
	case b := <-readBufs:
		return b[:0]
	default:
		return make([]byte, 0, cas.ChunkSize)
	}
}

func putReadBuf(b []byte) {
	if cap(b) != cas.ChunkSize {
		return
	}
	select {
	case readBufs <- b[:0]:
	default:
	}
}

// Put stores the blocks in one transaction, synced to disk before it
// returns: after a crash either all of them are stored or none is. Blocks
// already present are skipped. A cancelled ctx rolls the whole Put back.
// A block over [cas.MaxBlockSize] is refused, and then none is stored.
func (s *Store) Put(ctx context.Context, blocks ...cas.Block) error {
	if err := cas.CheckBlockSizes(blocks...); err != nil {
		return err
	}
	end, err := s.begin(ctx, true)
	if err != nil {
		return err
	}
	defer end()
	if len(blocks) == 0 {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	// The index is read and written in key order, the pack in the order
	// given (a file's chunks stay in file order). bbolt inserts into a
	// leaf by shifting the entries after the new one, and splits leaves
	// only at commit: a batch of thousands of keys in random order into a
	// small tree moved memory quadratically, while keys in order land
	// after the ones before them.
	order := make([]int, len(blocks))
	keys := make([][]byte, len(blocks))
	for i, b := range blocks {
		order[i], keys[i] = i, b.CID().Bytes()
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(keys[a], keys[b]) })
	// Small blocks go to the pack only in a Put with enough of them to
	// be worth the pack's fsync: a single invocation's few blocks stay
	// inline, a scheduler's commit of thousands goes to the pack.
	smallBytes := 0
	for _, b := range blocks {
		if n := len(b.Data()); n >= packMin && n < packBuffered {
			smallBytes += n
		}
	}
	packSmall := smallBytes >= packSmallMin
	err = update(s.db, func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketBlocks)
		// fresh[i] tells whether blocks[i] is to be stored: not stored
		// already, nor given before in this Put. values[i] is what the
		// index gets for it.
		fresh := make([]bool, len(blocks))
		values := make([][]byte, len(blocks))
		inserted := 0
		for j, i := range order {
			if j%ctxCheckEvery == ctxCheckEvery-1 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if j > 0 && bytes.Equal(keys[i], keys[order[j-1]]) || bk.Get(keys[i]) != nil {
				continue
			}
			fresh[i] = true
			inserted++
		}
		if inserted == 0 {
			return errNothingNew // roll back: no commit, no sync
		}
		cur := currentPack(tx)
		committed, _ := getPackStat(tx, cur)
		pw := s.packs.newPackWriter(cur, committed, func(full uint64) (uint64, packStat) {
			ps, _ := getPackStat(tx, full+1)
			return full + 1, ps
		})
		// Small blocks bound for the pack are gathered and written with
		// one call.
		pw.buf = getWriteBuf(min(smallBytes, writeBufMax))
		pw.bufMax = cap(pw.buf)
		defer func() { putWriteBuf(pw.buf) }()
		var inl []byte // the records of the blocks kept inline
		for i, b := range blocks {
			if i%ctxCheckEvery == ctxCheckEvery-1 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if !fresh[i] {
				continue
			}
			data := b.Data()
			if len(data) < packMin || len(data) < packBuffered && !packSmall {
				values[i] = inlineValue(data)
				inl = appendInlineRecord(inl, b.CID(), data)
				continue
			}
			loc, err := pw.write(b.CID(), data)
			if err != nil {
				return err
			}
			values[i] = loc.encode()
		}
		for j, i := range order {
			if j%ctxCheckEvery == ctxCheckEvery-1 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if !fresh[i] {
				continue
			}
			if err := bk.Put(keys[i], values[i]); err != nil {
				return fmt.Errorf("put block %s: %w", blocks[i].CID(), err)
			}
		}
		if err := s.packs.appendInline(inl); err != nil {
			return err
		}
		if len(pw.files) == 0 {
			return ctx.Err()
		}
		if err := pw.finish(); err != nil {
			return err
		}
		if err := pw.saveCounts(tx); err != nil {
			return err
		}
		return ctx.Err()
	})
	if errors.Is(err, errNothingNew) {
		return nil
	}
	return err
}

// Delete removes the blocks that are present, in one transaction. Only
// garbage collection (and an import undoing itself) should call it.
//
// Delete only removes index entries and lowers the counts of the packs
// they pointed into; it never removes or cuts a pack file. The space goes
// back when [Store.Compact] runs (gc runs it after its sweep), or when
// the next writer's recovery finds a pack nothing points into; both
// decide from the index itself, never from the counts.
func (s *Store) Delete(ctx context.Context, cids ...cid.Cid) error {
	end, err := s.begin(ctx, true)
	if err != nil {
		return err
	}
	defer end()
	if len(cids) == 0 {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return update(s.db, func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketBlocks)
		stats := map[uint64]packStat{}
		for i, c := range cids {
			if i%ctxCheckEvery == ctxCheckEvery-1 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			v := bk.Get(c.Bytes())
			if v == nil {
				continue
			}
			if e, err := decodeEntry(v); err == nil && e.packed {
				ps, ok := stats[e.loc.pack]
				if !ok {
					ps, _ = getPackStat(tx, e.loc.pack)
				}
				// Counts that were wrong stay at zero rather than
				// wrap around.
				ps.live -= min(ps.live, 1)
				ps.liveBytes -= min(ps.liveBytes, e.loc.length)
				stats[e.loc.pack] = ps
			}
			if err := bk.Delete(c.Bytes()); err != nil {
				return fmt.Errorf("delete block %s: %w", c, err)
			}
		}
		for n, ps := range stats {
			if err := putPackStat(tx, n, ps); err != nil {
				return err
			}
		}
		return ctx.Err()
	})
}

// AllKeys calls fn with the CID and stored size of every block, in the
// byte order of the binary CIDs, without reading the blocks' bytes. If fn
// returns an error, AllKeys stops and returns it; a cancelled ctx stops it
// between blocks with ctx.Err().
//
// A damaged index does not stop it: an entry whose value does not decode
// is reported with size -1 (View of it returns the error), and a key that
// is no CID is passed over; [Store.CheckStore] names both.
//
// AllKeys reads the keys in batches and holds no transaction open while fn
// runs, so fn may use the store; a block put or deleted during the scan
// may or may not be reported.
func (s *Store) AllKeys(ctx context.Context, fn func(c cid.Cid, size int) error) error {
	type keyEntry struct {
		c    cid.Cid
		size int
	}
	batch := make([]keyEntry, 0, scanBatch)
	var after []byte // the last key read
	for {
		end, err := s.begin(ctx, false)
		if err != nil {
			return err
		}
		batch = batch[:0]
		read, done := 0, false
		err = view(s.db, func(tx *bolt.Tx) error {
			cur := tx.Bucket(bucketBlocks).Cursor()
			var k, v []byte
			if after == nil {
				k, v = cur.First()
			} else if k, v = cur.Seek(after); bytes.Equal(k, after) {
				k, v = cur.Next()
			}
			for ; k != nil && read < scanBatch; k, v = cur.Next() {
				read++
				after = append(after[:0], k...)
				c, err := cas.CastCID(k)
				if err != nil {
					continue // no CID to report it under; CheckStore names it
				}
				size := -1 // an entry that does not decode: View says why
				if e, err := decodeEntry(v); err == nil {
					size = e.size()
				}
				batch = append(batch, keyEntry{c, size})
			}
			done = k == nil
			return nil
		})
		end()
		if err != nil {
			return err
		}
		for _, e := range batch {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(e.c, e.size); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
	}
}

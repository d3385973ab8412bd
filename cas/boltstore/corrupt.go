package boltstore

import (
	"fmt"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
	bolt "go.etcd.io/bbolt"
)

// Corrupt is a test hook: it flips (inverts) the byte at offset flip of
// the block c stored in the store in dir, in the database or in its pack
// file, without touching its key, so that tests (the CLI's testscript
// command corrupt among them) can check that reads, fsck and the like
// catch a damaged block. It opens the store for writing, so it fails with
// a [*cas.BusyError] while another process holds it. A missing block is a
// [*cas.NotFoundError]; flip must lie within the block. Nothing but tests
// should call it.
func Corrupt(dir string, c cid.Cid, flip int) error {
	s, err := Open(dir, &Options{Command: "corrupt (test hook)"})
	if err != nil {
		return err
	}
	err = update(s.db, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketBlocks)
		v := b.Get(c.Bytes())
		if v == nil {
			return &cas.NotFoundError{CID: c}
		}
		e, err := decodeEntry(v)
		if err != nil {
			return err
		}
		if flip < 0 || flip >= e.size() {
			return fmt.Errorf("corrupt block %s: offset %d outside its %d bytes", c, flip, e.size())
		}
		if !e.packed {
			d := inlineValue(e.inline)
			d[1+flip] ^= 0xff
			return b.Put(c.Bytes(), d)
		}
		f, err := s.packs.file(e.loc.pack, false)
		if err != nil {
			return err
		}
		one := make([]byte, 1)
		off := int64(e.loc.offset) + int64(flip)
		if _, err := f.ReadAt(one, off); err != nil {
			return err
		}
		one[0] ^= 0xff
		if _, err := f.WriteAt(one, off); err != nil {
			return err
		}
		return f.Sync()
	})
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}

// SetPackCounts is a test hook: it overwrites the counts the store in dir
// keeps for pack n (blocks, bytes and committed end), as one wrong number
// in the database would, so that tests can check that nothing trusts
// them over the index. Nothing but tests should call it.
func SetPackCounts(dir string, n, blocks, bytes, end uint64) error {
	s, err := Open(dir, &Options{Command: "set pack counts (test hook)"})
	if err != nil {
		return err
	}
	err = update(s.db, func(tx *bolt.Tx) error {
		return putPackStat(tx, n, packStat{live: blocks, liveBytes: bytes, end: end})
	})
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}

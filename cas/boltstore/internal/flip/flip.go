// Package flip damages a stored block in place, where
// [boltstore.Store.Locate] says it lies, for the tests of the code that
// must catch the damage: boltstore's own and, through
// cas/boltstore/boltstoretest, everyone else's.
package flip

import (
	"fmt"
	"os"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// Block inverts the byte at offset at of the block c, which lies length
// bytes from offset in file, and syncs the file. at must lie within the
// block.
func Block(c cid.Cid, file string, offset, length int64, at int) error {
	if at < 0 || int64(at) >= length {
		return fmt.Errorf("corrupt block %s: offset %d outside its %d bytes: %w", c, at, length, cas.ErrInvalid)
	}
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	one := make([]byte, 1)
	off := offset + int64(at)
	_, err = f.ReadAt(one, off)
	if err == nil {
		one[0] ^= 0xff
		_, err = f.WriteAt(one, off)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

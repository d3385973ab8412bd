// Package boltstoretest damages a [boltstore] store on disk, for the tests
// of the code that must catch the damage (the CLI's testscript command
// corrupt among them). Only tests import it.
package boltstoretest

import (
	"context"

	"github.com/haygent/hg/cas/boltstore"
	"github.com/haygent/hg/cas/boltstore/internal/flip"
	"github.com/ipfs/go-cid"
)

// Corrupt inverts the byte at offset at of the block c stored in the
// store in dir, in the database or in its pack file, where
// [boltstore.Store.Locate] says it lies, without touching its key. It
// opens the store for writing, so it fails with a [*cas.BusyError] while
// another process holds it. A missing block is a [*cas.NotFoundError];
// at must lie within the block.
func Corrupt(dir string, c cid.Cid, at int) error {
	s, err := boltstore.Open(dir, &boltstore.Options{Command: "corrupt (test hook)"})
	if err != nil {
		return err
	}
	ext, err := s.Locate(context.Background(), c)
	if err == nil {
		err = flip.Block(c, ext.File, ext.Offset, ext.Length, at)
	}
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}

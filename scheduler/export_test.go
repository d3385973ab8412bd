package scheduler

import (
	"context"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// EncodeRecord encodes every page of rec and its root, for tests that
// store a record of their own making.
func EncodeRecord(rec *Record) ([]cas.Block, cid.Cid, error) {
	return encodeRecord(context.Background(), rec, nil)
}

// SetCommitChunk sets how many blocks go in one commit transaction, until
// the returned function restores it.
func SetCommitChunk(n int) (restore func()) {
	old := commitChunk
	commitChunk = n
	return func() { commitChunk = old }
}

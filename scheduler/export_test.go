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

// SetSignaturesAhead sets how many batches of signatures may be checked
// ahead of the nodes' verification, until the returned function restores
// it.
func SetSignaturesAhead(n int) (restore func()) {
	old := signaturesAhead
	signaturesAhead = n
	return func() { signaturesAhead = old }
}

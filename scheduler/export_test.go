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

// SignaturesAhead returns options under which VerifyRun checks at most n
// batches of signatures ahead of the nodes' verification.
func SignaturesAhead(n int) *VerifyOptions { return &VerifyOptions{signaturesAhead: n} }

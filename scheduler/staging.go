package scheduler

import (
	"context"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
)

// staging is the private store a node runs against; its blocks reach the
// real store in one short transaction once the node is accepted.
type staging struct {
	*memstore.Store
}

func newStaging() *staging { return &staging{Store: memstore.New()} }

// blocks returns every block of the staging store, as they were put
// (every Put takes cas.Blocks, which match their CIDs by construction).
func (s *staging) blocks() ([]cas.Block, error) {
	return s.Store.Blocks(context.Background())
}

package scheduler

import (
	"context"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/ipfs/go-cid"
)

// staging is the private store a node runs against; its blocks reach the
// real store in one short transaction once the node is accepted.
type staging struct {
	*memstore.Store
}

func newStaging() *staging { return &staging{Store: memstore.New()} }

// blocks returns every block of the staging store. They were verified on
// the way in (every Put takes a cas.Block) and are verified again on Get.
func (s *staging) blocks() []cas.Block {
	ctx := context.Background()
	var out []cas.Block
	_ = s.Store.AllKeys(ctx, func(c cid.Cid, _ int) error {
		data, err := s.Store.Get(ctx, c)
		if err != nil {
			return err
		}
		b, err := cas.NewBlockWithCID(c, data)
		if err != nil {
			return err
		}
		out = append(out, b)
		return nil
	})
	return out
}

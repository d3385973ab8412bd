package scheduler

import (
	"context"
	"slices"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/ipfs/go-cid"
)

// staging is the private store a node runs against; its blocks reach the
// real store in one short transaction once the node is accepted. Under
// its own blocks it sees a read-only base (the package tree, shared by
// every node that runs the package), which it neither copies nor returns.
type staging struct {
	*memstore.Store
	base map[cid.Cid]cas.Block
}

// newStaging returns an empty staging store over base, which may be nil
// and must not change while the staging store is in use.
func newStaging(base map[cid.Cid]cas.Block) *staging {
	return &staging{Store: memstore.New(), base: base}
}

// blockIndex maps blocks by CID, as a staging base.
func blockIndex(blocks []cas.Block) map[cid.Cid]cas.Block {
	m := make(map[cid.Cid]cas.Block, len(blocks))
	for _, b := range blocks {
		m[b.CID()] = b
	}
	return m
}

// Has implements [cas.Store].
func (s *staging) Has(ctx context.Context, c cid.Cid) (bool, error) {
	if _, ok := s.base[c]; ok {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		return true, nil
	}
	return s.Store.Has(ctx, c)
}

// Get implements [cas.Store].
func (s *staging) Get(ctx context.Context, c cid.Cid) ([]byte, error) {
	var out []byte
	err := s.View(ctx, c, func(data []byte) error {
		out = slices.Clone(data)
		return nil
	})
	return out, err
}

// View implements [cas.Store].
func (s *staging) View(ctx context.Context, c cid.Cid, fn func([]byte) error) error {
	if b, ok := s.base[c]; ok {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(b.Data())
	}
	return s.Store.View(ctx, c, fn)
}

// blocks returns the blocks put into the staging store, not its base, as
// they were put (every Put takes cas.Blocks, which match their CIDs by
// construction).
func (s *staging) blocks() ([]cas.Block, error) {
	return s.Store.Blocks(context.Background())
}

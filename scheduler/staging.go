package scheduler

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/ipfs/go-cid"
)

// staging is the private store a node runs against; its blocks reach the
// real store in one short transaction once the node is accepted. Under
// its own blocks it sees a read-only base (the package tree, shared by
// every node that runs the package), which it neither copies nor returns.
//
// Its blocks are kept as the cas.Blocks they were handed in as, in a
// small map: a node makes a dozen blocks, and an arena chunk for each
// node's store would cost more than the blocks. Its pins and refs are
// the embedded memstore.Names.
type staging struct {
	*memstore.Names
	base map[cid.Cid]cas.Block

	mu    sync.RWMutex
	own   map[cid.Cid]cas.Block // nil once closed
	order []cid.Cid             // own's CIDs in the order put
}

var errStagingClosed = errors.New("staging store is closed")

var _ cas.Store = (*staging)(nil)

// Close implements [cas.Store].
func (s *staging) Close() error {
	s.mu.Lock()
	s.own, s.order = nil, nil
	s.mu.Unlock()
	return s.Names.Close()
}

// use takes the lock (for writing if write) and reports an error if the
// store is closed or ctx is done; on success the caller must call done.
func (s *staging) use(ctx context.Context, write bool) (done func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lock, unlock := s.mu.RLock, s.mu.RUnlock
	if write {
		lock, unlock = s.mu.Lock, s.mu.Unlock
	}
	lock()
	if s.own == nil {
		unlock()
		return nil, errStagingClosed
	}
	return unlock, nil
}

// newStaging returns an empty staging store over base, which may be nil
// and must not change while the staging store is in use.
func newStaging(base map[cid.Cid]cas.Block) *staging {
	return &staging{Names: memstore.NewNames(), base: base, own: map[cid.Cid]cas.Block{}}
}

// blockIndex maps blocks by CID, as a staging base.
func blockIndex(blocks []cas.Block) map[cid.Cid]cas.Block {
	m := make(map[cid.Cid]cas.Block, len(blocks))
	for _, b := range blocks {
		m[b.CID()] = b
	}
	return m
}

// lookup finds c among the base's blocks and the staging store's own.
func (s *staging) lookup(ctx context.Context, c cid.Cid) (cas.Block, bool, error) {
	done, err := s.use(ctx, false)
	if err != nil {
		return cas.Block{}, false, err
	}
	defer done()
	if b, ok := s.base[c]; ok {
		return b, true, nil
	}
	b, ok := s.own[c]
	return b, ok, nil
}

// Has implements [cas.Store].
func (s *staging) Has(ctx context.Context, c cid.Cid) (bool, error) {
	_, ok, err := s.lookup(ctx, c)
	return ok, err
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
	b, ok, err := s.lookup(ctx, c)
	if err != nil {
		return err
	}
	if !ok {
		return &cas.NotFoundError{CID: c}
	}
	return fn(b.Data())
}

// Put implements [cas.Store]. It keeps a copy of each block's bytes.
func (s *staging) Put(ctx context.Context, blocks ...cas.Block) error {
	if err := cas.CheckBlockSizes(blocks...); err != nil {
		return err
	}
	done, err := s.use(ctx, false)
	if err != nil {
		return err
	}
	done()
	own := make([]cas.Block, len(blocks))
	for i, b := range blocks {
		own[i] = b.Clone()
	}
	return s.Adopt(own...)
}

// Adopt stores blocks the caller hands over and never modifies again, as
// a [cas.Writer] without OnFlush does, without copying them.
func (s *staging) Adopt(blocks ...cas.Block) error {
	if err := cas.CheckBlockSizes(blocks...); err != nil {
		return err
	}
	done, err := s.use(context.Background(), true)
	if err != nil {
		return err
	}
	defer done()
	for _, b := range blocks {
		if _, ok := s.own[b.CID()]; !ok {
			s.own[b.CID()] = b
			s.order = append(s.order, b.CID())
		}
	}
	return nil
}

// Delete implements [cas.Store]. The base is not the staging store's to
// change.
func (s *staging) Delete(ctx context.Context, cids ...cid.Cid) error {
	done, err := s.use(ctx, true)
	if err != nil {
		return err
	}
	defer done()
	for _, c := range cids {
		if _, ok := s.own[c]; ok {
			delete(s.own, c)
			s.order = slices.DeleteFunc(s.order, func(o cid.Cid) bool { return o == c })
		}
	}
	return nil
}

// AllKeys implements [cas.Store]: the staging store's own blocks, in the
// byte order of their CIDs as every store lists them.
func (s *staging) AllKeys(ctx context.Context, fn func(cid.Cid, int) error) error {
	done, err := s.use(ctx, false)
	if err != nil {
		return err
	}
	type entry struct {
		c    cid.Cid
		size int
	}
	all := make([]entry, 0, len(s.own))
	for c, b := range s.own {
		all = append(all, entry{c, len(b.Data())})
	}
	done()
	slices.SortFunc(all, func(a, b entry) int { return slices.Compare(a.c.Bytes(), b.c.Bytes()) })
	for _, e := range all {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(e.c, e.size); err != nil {
			return err
		}
	}
	return nil
}

// blocks returns the blocks put into the staging store, not its base, as
// they were put (every Put takes cas.Blocks, which match their CIDs by
// construction), in the order put, less any deleted since.
func (s *staging) blocks() ([]cas.Block, error) {
	done, err := s.use(context.Background(), false)
	if err != nil {
		return nil, err
	}
	defer done()
	out := make([]cas.Block, 0, len(s.own))
	for _, c := range s.order {
		if b, ok := s.own[c]; ok {
			out = append(out, b)
		}
	}
	return out, nil
}

package storetest

import (
	"context"
	"slices"
	"sync"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// Corruptible is a store whose blocks a test can damage: after
// [Corruptible.Corrupt] it holds other bytes under a block's CID, as a
// failing disk would leave them, and reads of the block verify those
// bytes and fail as reads of a damaged block do, with a
// [*cas.CorruptError]. It wraps any store, for the tests of the code
// that reads blocks (walks, exports, fsck, verification) and must catch
// the damage; everything but the damaged blocks' bytes is the wrapped
// store's.
type Corruptible struct {
	cas.Store

	mu  sync.RWMutex
	bad map[cid.Cid][]byte // what Corrupt put in place of blocks
}

// NewCorruptible wraps st.
func NewCorruptible(st cas.Store) *Corruptible {
	return &Corruptible{Store: st, bad: map[cid.Cid][]byte{}}
}

// Corrupt makes the store hold data in place of the block c, without
// hashing it. It reports whether c is stored.
func (s *Corruptible) Corrupt(c cid.Cid, data []byte) bool {
	if ok, err := s.Store.Has(context.Background(), c); err != nil || !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bad[c] = slices.Clone(data)
	return true
}

// damaged returns what Corrupt put in place of c.
func (s *Corruptible) damaged(c cid.Cid) ([]byte, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d, ok := s.bad[c]
	return d, ok
}

// Get implements [cas.BlockReader].
func (s *Corruptible) Get(ctx context.Context, c cid.Cid) ([]byte, error) {
	bad, ok := s.damaged(c)
	if !ok {
		return s.Store.Get(ctx, c)
	}
	if err := s.check(ctx, c, bad); err != nil {
		return nil, err
	}
	return slices.Clone(bad), nil
}

// View implements [cas.BlockReader].
func (s *Corruptible) View(ctx context.Context, c cid.Cid, fn func([]byte) error) error {
	bad, ok := s.damaged(c)
	if !ok {
		return s.Store.View(ctx, c, fn)
	}
	if err := s.check(ctx, c, bad); err != nil {
		return err
	}
	return fn(bad)
}

// check hashes what Corrupt put in place of c, as a store verifies a
// block it reads, after the wrapped store has said whether ctx is done
// or it is closed.
func (s *Corruptible) check(ctx context.Context, c cid.Cid, bad []byte) error {
	if _, err := s.Store.Has(ctx, c); err != nil {
		return err
	}
	return cas.Verify(c, bad)
}

// AllKeys implements [cas.BlockEnumerator], with the damaged blocks'
// sizes.
func (s *Corruptible) AllKeys(ctx context.Context, fn func(cid.Cid, int) error) error {
	return s.Store.AllKeys(ctx, func(c cid.Cid, size int) error {
		if bad, ok := s.damaged(c); ok {
			size = len(bad)
		}
		return fn(c, size)
	})
}

// Delete implements [cas.BlockWriter]: a damaged block deleted and put
// again is whole.
func (s *Corruptible) Delete(ctx context.Context, cids ...cid.Cid) error {
	if err := s.Store.Delete(ctx, cids...); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cids {
		delete(s.bad, c)
	}
	return nil
}

// Package memstore is an in-memory [cas.Store], for tests and for work
// that must leave nothing behind.
package memstore

import (
	"context"
	"slices"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// Store keeps blocks in an arena (see arena.go), and pins and refs in
// its [Names]. The zero value is not usable; call [New].
type Store struct {
	*Names
	g      guard // of blocks
	blocks arena
}

// New returns an empty store.
func New() *Store {
	s := &Store{Names: NewNames(), blocks: newArena()}
	s.g.init()
	return s
}

var _ cas.Store = (*Store)(nil)

// Has implements [cas.Store].
func (s *Store) Has(ctx context.Context, c cid.Cid) (bool, error) {
	unlock, err := s.g.read(ctx)
	if err != nil {
		return false, err
	}
	defer unlock()
	_, ok := s.blocks.find(c)
	return ok, nil
}

// Get implements [cas.Store].
func (s *Store) Get(ctx context.Context, c cid.Cid) ([]byte, error) {
	var out []byte
	err := s.View(ctx, c, func(data []byte) error {
		out = slices.Clone(data)
		return nil
	})
	return out, err
}

// View implements [cas.Store].
func (s *Store) View(ctx context.Context, c cid.Cid, fn func([]byte) error) error {
	unlock, err := s.g.read(ctx)
	if err != nil {
		return err
	}
	l, ok := s.blocks.find(c)
	var data []byte
	if ok {
		data = s.blocks.data(l)
	}
	unlock()
	if !ok {
		return &cas.NotFoundError{CID: c}
	}
	// Bytes can only enter through Put and Adopt, copied from cas.Block
	// values, which match their CIDs, into arena space never written
	// again: they need no hashing again. (Tests that damage blocks wrap
	// the store in a storetest.Corruptible.)
	return fn(data)
}

// Put implements [cas.Store]. It keeps a copy of each block's bytes. A
// block over [cas.MaxBlockSize] is refused, and then none is stored.
func (s *Store) Put(ctx context.Context, blocks ...cas.Block) error {
	if err := cas.CheckBlockSizes(blocks...); err != nil {
		return err
	}
	unlock, err := s.g.write(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	for _, b := range blocks {
		s.blocks.add(b.CID(), b.Data())
	}
	return nil
}

// Adopt stores blocks as Put does, for callers that hand blocks over (a
// [cas.Writer] without OnFlush, a scheduler moving an engine's blocks).
// The arena copies them all the same: a copy costs less than the
// collector's work on a million separately allocated blocks.
func (s *Store) Adopt(blocks ...cas.Block) error {
	return s.Put(context.Background(), blocks...)
}

// Delete implements [cas.Store].
func (s *Store) Delete(ctx context.Context, cids ...cid.Cid) error {
	unlock, err := s.g.write(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	for _, c := range cids {
		s.blocks.remove(c)
	}
	return nil
}

// AllKeys implements [cas.Store]. Blocks come in the byte order of their
// binary CIDs, as in the bbolt store.
func (s *Store) AllKeys(ctx context.Context, fn func(cid.Cid, int) error) error {
	unlock, err := s.g.read(ctx)
	if err != nil {
		return err
	}
	type kv struct {
		c    cid.Cid
		size int
	}
	all := make([]kv, 0, s.blocks.len())
	s.blocks.each(func(c cid.Cid, l loc) {
		all = append(all, kv{c, int(l.n)})
	})
	unlock()
	slices.SortFunc(all, func(a, b kv) int { return compareKeys(a.c, b.c) })
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

func compareKeys(a, b cid.Cid) int {
	return slices.Compare(a.Bytes(), b.Bytes())
}

// Close implements [cas.Store].
func (s *Store) Close() error {
	err := s.g.close(func() { s.blocks = arena{} })
	if nerr := s.Names.Close(); err == nil {
		err = nerr
	}
	return err
}

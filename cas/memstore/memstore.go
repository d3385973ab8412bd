// Package memstore is an in-memory [cas.Store], for tests and for work
// that must leave nothing behind.
package memstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// Store keeps blocks in an arena (see arena.go) and pins and refs in
// maps. The zero value is not usable; call [New].
type Store struct {
	mu      sync.RWMutex
	blocks  arena
	pins    map[string]cid.Cid
	refs    map[string]map[string]cid.Cid // namespace -> name -> CID
	tainted map[cid.Cid][]byte            // bytes Corrupt put in place of blocks
	closed  bool
	// runlock and unlock are mu's, bound once: a method value made at
	// each read would cost an allocation per block read.
	runlock, unlock func()
}

var errClosed = errors.New("memstore: store is closed")

// New returns an empty store.
func New() *Store {
	s := &Store{blocks: newArena(), pins: make(map[string]cid.Cid), refs: make(map[string]map[string]cid.Cid)}
	s.runlock, s.unlock = s.mu.RUnlock, s.mu.Unlock
	return s
}

var _ cas.Store = (*Store)(nil)

func (s *Store) read(ctx context.Context) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, errClosed
	}
	return s.runlock, nil
}

func (s *Store) write(ctx context.Context) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errClosed
	}
	return s.unlock, nil
}

// Has implements [cas.Store].
func (s *Store) Has(ctx context.Context, c cid.Cid) (bool, error) {
	unlock, err := s.read(ctx)
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
	unlock, err := s.read(ctx)
	if err != nil {
		return err
	}
	l, ok := s.blocks.find(c)
	var data []byte
	if ok {
		data = s.blocks.data(l)
	}
	bad, tainted := s.tainted[c]
	unlock()
	if !ok {
		return &cas.NotFoundError{CID: c}
	}
	// Bytes can only enter through Put and Adopt, copied from cas.Block
	// values, which match their CIDs, into arena space never written
	// again; only the Corrupt test hook can make them wrong, so only its
	// blocks need hashing again.
	if tainted {
		if err := cas.Verify(c, bad); err != nil {
			return err
		}
		data = bad
	}
	return fn(data)
}

// Put implements [cas.Store]. It keeps a copy of each block's bytes. A
// block over [cas.MaxBlockSize] is refused, and then none is stored.
func (s *Store) Put(ctx context.Context, blocks ...cas.Block) error {
	if err := cas.CheckBlockSizes(blocks...); err != nil {
		return err
	}
	unlock, err := s.write(ctx)
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
	unlock, err := s.write(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	for _, c := range cids {
		s.blocks.remove(c)
		delete(s.tainted, c)
	}
	return nil
}

// AllKeys implements [cas.Store]. Blocks come in the byte order of their
// binary CIDs, as in the bbolt store.
func (s *Store) AllKeys(ctx context.Context, fn func(cid.Cid, int) error) error {
	unlock, err := s.read(ctx)
	if err != nil {
		return err
	}
	type kv struct {
		c    cid.Cid
		size int
	}
	all := make([]kv, 0, s.blocks.len())
	s.blocks.each(func(c cid.Cid, l loc) {
		size := int(l.n)
		if bad, ok := s.tainted[c]; ok {
			size = len(bad)
		}
		all = append(all, kv{c, size})
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

// SetPin implements [cas.Store].
func (s *Store) SetPin(ctx context.Context, name string, c cid.Cid) error {
	if err := cas.CheckPinName(name); err != nil {
		return err
	}
	unlock, err := s.write(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	s.pins[name] = c
	return nil
}

// DeletePin implements [cas.Store].
func (s *Store) DeletePin(ctx context.Context, name string) error {
	unlock, err := s.write(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if _, ok := s.pins[name]; !ok {
		return fmt.Errorf("pin %q: %w", name, cas.ErrNotFound)
	}
	delete(s.pins, name)
	return nil
}

// Pin implements [cas.Store].
func (s *Store) Pin(ctx context.Context, name string) (cid.Cid, error) {
	unlock, err := s.read(ctx)
	if err != nil {
		return cid.Undef, err
	}
	defer unlock()
	c, ok := s.pins[name]
	if !ok {
		return cid.Undef, fmt.Errorf("pin %q: %w", name, cas.ErrNotFound)
	}
	return c, nil
}

// Pins implements [cas.Store].
func (s *Store) Pins(ctx context.Context) ([]cas.Pin, error) {
	unlock, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	out := make([]cas.Pin, 0, len(s.pins))
	for n, c := range s.pins {
		out = append(out, cas.Pin{Name: n, CID: c})
	}
	slices.SortFunc(out, func(a, b cas.Pin) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// SetRef implements [cas.Store].
func (s *Store) SetRef(ctx context.Context, ns, name string, c cid.Cid) error {
	return s.SetRefs(ctx, cas.Ref{NS: ns, Name: name, CID: c})
}

// SetRefs implements [cas.Store].
func (s *Store) SetRefs(ctx context.Context, refs ...cas.Ref) error {
	if err := cas.CheckRefs(refs); err != nil {
		return err
	}
	unlock, err := s.write(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	for _, r := range refs {
		if s.refs[r.NS] == nil {
			s.refs[r.NS] = map[string]cid.Cid{}
		}
		s.refs[r.NS][r.Name] = r.CID
	}
	return nil
}

// GetRef implements [cas.Store].
func (s *Store) GetRef(ctx context.Context, ns, name string) (cid.Cid, error) {
	unlock, err := s.read(ctx)
	if err != nil {
		return cid.Undef, err
	}
	defer unlock()
	c, ok := s.refs[ns][name]
	if !ok {
		return cid.Undef, fmt.Errorf("ref %s/%s: %w", ns, name, cas.ErrNotFound)
	}
	return c, nil
}

// DeleteRef implements [cas.Store].
func (s *Store) DeleteRef(ctx context.Context, ns, name string) error {
	unlock, err := s.write(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if _, ok := s.refs[ns][name]; !ok {
		return fmt.Errorf("ref %s/%s: %w", ns, name, cas.ErrNotFound)
	}
	delete(s.refs[ns], name)
	if len(s.refs[ns]) == 0 {
		delete(s.refs, ns)
	}
	return nil
}

// Refs implements [cas.Store].
func (s *Store) Refs(ctx context.Context, ns string) ([]cas.Pin, error) {
	if err := cas.CheckRefNamespace(ns); err != nil {
		return nil, err
	}
	unlock, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	out := make([]cas.Pin, 0, len(s.refs[ns]))
	for n, c := range s.refs[ns] {
		out = append(out, cas.Pin{Name: n, CID: c})
	}
	slices.SortFunc(out, func(a, b cas.Pin) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// RefNamespaces implements [cas.Store].
func (s *Store) RefNamespaces(ctx context.Context) ([]string, error) {
	unlock, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	out := make([]string, 0, len(s.refs))
	for ns := range s.refs {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out, nil
}

// Close implements [cas.Store].
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	s.closed = true
	s.blocks, s.pins, s.refs = arena{}, nil, nil
	return nil
}

// Corrupt replaces the stored bytes of c without rehashing, so tests can
// check that reads catch a flipped byte. It reports whether c was present.
func (s *Store) Corrupt(c cid.Cid, data []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.blocks.find(c); !ok {
		return false
	}
	if s.tainted == nil {
		s.tainted = map[cid.Cid][]byte{}
	}
	s.tainted[c] = slices.Clone(data)
	return true
}

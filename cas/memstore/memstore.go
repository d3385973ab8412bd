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

// Store keeps blocks and pins in maps. The zero value is not usable; call
// [New].
type Store struct {
	mu      sync.RWMutex
	blocks  map[cid.Cid]cas.Block
	pins    map[string]cid.Cid
	refs    map[string]map[string]cid.Cid // namespace -> name -> CID
	tainted map[cid.Cid][]byte            // bytes Corrupt put in place of blocks
	closed  bool
}

var errClosed = errors.New("memstore: store is closed")

// New returns an empty store.
func New() *Store {
	return &Store{blocks: make(map[cid.Cid]cas.Block), pins: make(map[string]cid.Cid), refs: make(map[string]map[string]cid.Cid)}
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
	return s.mu.RUnlock, nil
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
	return s.mu.Unlock, nil
}

// Has implements [cas.Store].
func (s *Store) Has(ctx context.Context, c cid.Cid) (bool, error) {
	unlock, err := s.read(ctx)
	if err != nil {
		return false, err
	}
	defer unlock()
	_, ok := s.blocks[c]
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
	b, ok := s.blocks[c]
	bad, tainted := s.tainted[c]
	unlock()
	if !ok {
		return &cas.NotFoundError{CID: c}
	}
	data := b.Data()
	// Bytes can only enter through Put (a private copy) or Adopt (handed
	// over by a caller that never changes them again, as cas.NewBlock
	// asks), as cas.Block values that match their CIDs; only the Corrupt
	// test hook can make them wrong, so only its blocks need hashing
	// again.
	if tainted {
		if err := cas.Verify(c, bad); err != nil {
			return err
		}
		data = bad
	}
	return fn(data)
}

// Put implements [cas.Store]. It keeps a copy of each block's bytes.
func (s *Store) Put(ctx context.Context, blocks ...cas.Block) error {
	unlock, err := s.write(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	for _, b := range blocks {
		if _, ok := s.blocks[b.CID()]; !ok {
			s.blocks[b.CID()] = b.Clone()
		}
	}
	return nil
}

// Adopt stores blocks like Put but keeps their bytes instead of copying
// them: the caller hands the blocks over and must never modify their bytes
// again (as [cas.NewBlock] already asks). A scheduler adopts the blocks an
// engine returned, which nothing else holds.
func (s *Store) Adopt(blocks ...cas.Block) error {
	unlock, err := s.write(context.Background())
	if err != nil {
		return err
	}
	defer unlock()
	for _, b := range blocks {
		if _, ok := s.blocks[b.CID()]; !ok {
			s.blocks[b.CID()] = b
		}
	}
	return nil
}

// Delete implements [cas.Store].
func (s *Store) Delete(ctx context.Context, cids ...cid.Cid) error {
	unlock, err := s.write(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	for _, c := range cids {
		delete(s.blocks, c)
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
	all := make([]kv, 0, len(s.blocks))
	for c, b := range s.blocks {
		d := b.Data()
		if bad, ok := s.tainted[c]; ok {
			d = bad
		}
		all = append(all, kv{c, len(d)})
	}
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
	s.blocks, s.pins, s.refs = nil, nil, nil
	return nil
}

// Corrupt replaces the stored bytes of c without rehashing, so tests can
// check that reads catch a flipped byte. It reports whether c was present.
func (s *Store) Corrupt(c cid.Cid, data []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.blocks[c]; !ok {
		return false
	}
	if s.tainted == nil {
		s.tainted = map[cid.Cid][]byte{}
	}
	s.tainted[c] = slices.Clone(data)
	return true
}

// Blocks returns every block, as it was put, skipping blocks the Corrupt
// hook replaced. A scheduler uses it to move a staging store's blocks to
// another store without hashing them again.
func (s *Store) Blocks(ctx context.Context) ([]cas.Block, error) {
	unlock, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	out := make([]cas.Block, 0, len(s.blocks))
	for c, b := range s.blocks {
		if _, bad := s.tainted[c]; !bad {
			out = append(out, b)
		}
	}
	return out, nil
}

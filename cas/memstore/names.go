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

// Names keeps pins and refs in memory: the [cas.PinStore] and
// [cas.RefStore] of a [Store], and of other in-memory stores that keep
// their blocks their own way. It is safe for concurrent use. The zero
// value is not usable; call [NewNames].
type Names struct {
	g    guard
	pins map[string]cid.Cid
	refs map[string]map[string]cid.Cid // namespace -> name -> CID
}

// NewNames returns Names with no pin and no ref.
func NewNames() *Names {
	n := &Names{pins: make(map[string]cid.Cid), refs: make(map[string]map[string]cid.Cid)}
	n.g.init()
	return n
}

// SetPin implements [cas.PinStore].
func (n *Names) SetPin(ctx context.Context, name string, c cid.Cid) error {
	if err := cas.CheckPinName(name); err != nil {
		return err
	}
	unlock, err := n.g.write(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	n.pins[name] = c
	return nil
}

// DeletePin implements [cas.PinStore].
func (n *Names) DeletePin(ctx context.Context, name string) error {
	unlock, err := n.g.write(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if _, ok := n.pins[name]; !ok {
		return fmt.Errorf("pin %q: %w", name, cas.ErrNotFound)
	}
	delete(n.pins, name)
	return nil
}

// Pin implements [cas.PinStore].
func (n *Names) Pin(ctx context.Context, name string) (cid.Cid, error) {
	unlock, err := n.g.read(ctx)
	if err != nil {
		return cid.Undef, err
	}
	defer unlock()
	c, ok := n.pins[name]
	if !ok {
		return cid.Undef, fmt.Errorf("pin %q: %w", name, cas.ErrNotFound)
	}
	return c, nil
}

// Pins implements [cas.PinStore].
func (n *Names) Pins(ctx context.Context) ([]cas.Pin, error) {
	unlock, err := n.g.read(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	out := make([]cas.Pin, 0, len(n.pins))
	for n, c := range n.pins {
		out = append(out, cas.Pin{Name: n, CID: c})
	}
	slices.SortFunc(out, func(a, b cas.Pin) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// SetRef implements [cas.RefStore].
func (n *Names) SetRef(ctx context.Context, ns, name string, c cid.Cid) error {
	return n.SetRefs(ctx, cas.Ref{NS: ns, Name: name, CID: c})
}

// SetRefs implements [cas.RefStore].
func (n *Names) SetRefs(ctx context.Context, refs ...cas.Ref) error {
	if err := cas.CheckRefs(refs); err != nil {
		return err
	}
	unlock, err := n.g.write(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	for _, r := range refs {
		if n.refs[r.NS] == nil {
			n.refs[r.NS] = map[string]cid.Cid{}
		}
		n.refs[r.NS][r.Name] = r.CID
	}
	return nil
}

// GetRef implements [cas.RefStore].
func (n *Names) GetRef(ctx context.Context, ns, name string) (cid.Cid, error) {
	unlock, err := n.g.read(ctx)
	if err != nil {
		return cid.Undef, err
	}
	defer unlock()
	c, ok := n.refs[ns][name]
	if !ok {
		return cid.Undef, fmt.Errorf("ref %s/%s: %w", ns, name, cas.ErrNotFound)
	}
	return c, nil
}

// DeleteRef implements [cas.RefStore].
func (n *Names) DeleteRef(ctx context.Context, ns, name string) error {
	unlock, err := n.g.write(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if _, ok := n.refs[ns][name]; !ok {
		return fmt.Errorf("ref %s/%s: %w", ns, name, cas.ErrNotFound)
	}
	delete(n.refs[ns], name)
	if len(n.refs[ns]) == 0 {
		delete(n.refs, ns)
	}
	return nil
}

// Refs implements [cas.RefStore].
func (n *Names) Refs(ctx context.Context, ns string) ([]cas.Pin, error) {
	if err := cas.CheckRefNamespace(ns); err != nil {
		return nil, err
	}
	unlock, err := n.g.read(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	out := make([]cas.Pin, 0, len(n.refs[ns]))
	for n, c := range n.refs[ns] {
		out = append(out, cas.Pin{Name: n, CID: c})
	}
	slices.SortFunc(out, func(a, b cas.Pin) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// RefNamespaces implements [cas.RefStore].
func (n *Names) RefNamespaces(ctx context.Context) ([]string, error) {
	unlock, err := n.g.read(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	out := make([]string, 0, len(n.refs))
	for ns := range n.refs {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out, nil
}

// Close forgets every pin and ref; every later call fails, and so does
// closing again.
func (n *Names) Close() error {
	return n.g.close(func() { n.pins, n.refs = nil, nil })
}

var errClosed = errors.New("memstore: store is closed")

// guard is a lock and whether what it guards is closed.
type guard struct {
	mu     sync.RWMutex
	closed bool
	// mu's methods, bound once: a method value made at each read would
	// cost an allocation per block read.
	rlock, runlock, lock, unlock func()
}

func (g *guard) init() {
	g.rlock, g.runlock, g.lock, g.unlock = g.mu.RLock, g.mu.RUnlock, g.mu.Lock, g.mu.Unlock
}

// read takes the lock for reading, unless ctx is done or what it guards
// is closed; the caller calls the func returned.
func (g *guard) read(ctx context.Context) (func(), error) { return g.take(ctx, g.rlock, g.runlock) }

// write is read for writing.
func (g *guard) write(ctx context.Context) (func(), error) { return g.take(ctx, g.lock, g.unlock) }

func (g *guard) take(ctx context.Context, lock, unlock func()) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lock()
	if g.closed {
		unlock()
		return nil, errClosed
	}
	return unlock, nil
}

// close marks what g guards closed and calls fn, under the lock; closing
// it again is an error.
func (g *guard) close(fn func()) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return errClosed
	}
	g.closed = true
	fn()
	return nil
}

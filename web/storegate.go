package web

import (
	"context"
	"sync/atomic"
	"time"
)

// storeGate lets one page at a time hold the store, and after a page
// that others waited behind, leaves the store unheld for writerTurn
// before the next: bbolt's readers share its lock, and pages following
// each other back to back would hold it without a gap for as long as
// clients ask, keeping hg run (which waits for the lock, trying every
// 50 ms) from the store.
type storeGate struct {
	slot    chan struct{}
	waiting atomic.Int32
}

// writerTurn is how long the store is left unheld between pages that
// queued: over two of a writer's tries for the lock.
const writerTurn = 120 * time.Millisecond

func newStoreGate() *storeGate { return &storeGate{slot: make(chan struct{}, 1)} }

// enter waits for the store's turn, or for ctx.
func (g *storeGate) enter(ctx context.Context) error {
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	select {
	case g.slot <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// leave gives the turn on, after writerTurn when another page waits; the
// caller has closed the store and goes on at once.
func (g *storeGate) leave() {
	if g.waiting.Load() == 0 {
		<-g.slot
		return
	}
	go func() {
		time.Sleep(writerTurn)
		<-g.slot
	}()
}

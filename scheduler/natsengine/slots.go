package natsengine

import (
	"context"
	"sync"
)

// jobSlots are a worker's job slots: one for each invocation it runs at
// once. A worker takes a message when a slot is free; the other members
// of a batch it took each wait for a slot of their own, and come first:
// the worker takes no other message while one of them waits.
type jobSlots struct {
	mu       sync.Mutex
	cond     *sync.Cond
	free     int
	waiting  int // members of batches held, waiting for a slot
	expected int // members of batches held that have yet to ask for one
}

// newJobSlots returns n free slots; a take waiting when ctx ends returns.
func newJobSlots(ctx context.Context, n int) *jobSlots {
	s := &jobSlots{free: n}
	s.cond = sync.NewCond(&s.mu)
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	return s
}

// take waits for a free slot and takes it, for a member of a batch held
// (member) or for a new message, which waits while members do. It
// reports false, taking nothing, if ctx ended first.
func (s *jobSlots) take(ctx context.Context, member bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if member {
		if s.expected > 0 {
			s.expected--
		}
		s.waiting++
		defer func() {
			if s.waiting--; s.waiting+s.expected == 0 {
				s.cond.Broadcast() // a message may be taken now
			}
		}()
	}
	for s.free == 0 || (!member && s.waiting+s.expected > 0) {
		if ctx.Err() != nil {
			return false
		}
		s.cond.Wait()
	}
	if ctx.Err() != nil {
		return false
	}
	s.free--
	return true
}

// expect says that n members of a batch held will each ask for a slot:
// until they have, the worker takes no other message, even with a slot
// free between two of them.
func (s *jobSlots) expect(n int) {
	s.mu.Lock()
	s.expected += n
	s.mu.Unlock()
}

// put gives a slot back.
func (s *jobSlots) put() {
	s.mu.Lock()
	s.free++
	s.cond.Broadcast()
	s.mu.Unlock()
}

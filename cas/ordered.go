package cas

import (
	"context"
	"runtime"
	"sync"
)

// ordered runs work on a pool of goroutines and hands the results back in
// the order the work was submitted: chunks are hashed, fetched and
// verified on every core while their consumer sees them in file order.
//
// One producer goroutine submits (or hands over results it has already)
// and calls done when it has no more; the consumer ranges over results.
// A cancelled ctx stops the producer's next submission and the delivery,
// so a consumer that gives up cancels, then drains results.
type ordered[T any] struct {
	ctx     context.Context
	jobs    chan func()
	order   chan chan T
	results chan T
	wg      sync.WaitGroup
}

// newOrdered starts the workers (at least two, one per core) and the
// collector; up to depth results can wait in order, ahead of the
// consumer.
func newOrdered[T any](ctx context.Context, depth int) *ordered[T] {
	workers := max(2, runtime.GOMAXPROCS(0))
	o := &ordered[T]{ctx: ctx, jobs: make(chan func(), workers), order: make(chan chan T, depth*workers), results: make(chan T, workers)}
	for range workers {
		o.wg.Go(func() {
			for j := range o.jobs {
				j()
			}
		})
	}
	go func() { // collect, in order
		defer close(o.results)
		for out := range o.order {
			select {
			case o.results <- <-out:
			case <-ctx.Done():
				return
			}
		}
	}()
	return o
}

// submit queues work, whose result takes the next place in order. It
// reports false, having queued nothing, once ctx is done.
func (o *ordered[T]) submit(work func() T) bool {
	out := make(chan T, 1)
	select {
	case o.order <- out:
	case <-o.ctx.Done():
		return false
	}
	// Workers take every job until done closes jobs, and never block on
	// out, so this send always completes.
	o.jobs <- func() { out <- work() }
	return true
}

// ready puts a result the producer already has in the next place. It
// reports false once ctx is done.
func (o *ordered[T]) ready(v T) bool {
	out := make(chan T, 1)
	out <- v
	select {
	case o.order <- out:
		return true
	case <-o.ctx.Done():
		return false
	}
}

// done says nothing more will be submitted: the workers finish what they
// have and results closes after the last one is delivered.
func (o *ordered[T]) done() {
	close(o.jobs)
	o.wg.Wait()
	close(o.order)
}

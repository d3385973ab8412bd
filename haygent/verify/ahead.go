package verify

import (
	"context"
	"sync"

	"github.com/ipfs/go-cid"
)

// aheadQueue bounds the receipts waiting for a worker ahead of the walk;
// past it a receipt is left to the walk.
const aheadQueue = 4096

// Ahead has cv verify the receipts upstream of the one it is asked for
// on workers goroutines of their own, each as soon as a receipt naming it
// is read, ahead of the walk that needs its verdict: the receipts of a
// long chain are then checked on as many cores, while the walk down the
// chain composes their verdicts. What each check finds is the same: a
// worker makes the receipt's own checks ([VerifyReceiptKnown]'s), and the
// walk adds "upstream receipts" as before. For a verifier asked for one
// receipt at a time (a page, a report); call it before the first Verify.
func (cv *ChainVerifier) Ahead(workers int) { cv.aheadWorkers = workers }

// aheadEntry is one receipt's own checks, made or being made.
type aheadEntry struct {
	done chan struct{}
	v    *Verification
	err  error
}

// walk is one call of Verify: the receipts being verified down the chain
// on this goroutine (path, a set), and the queue of the workers ahead of
// it (nil: none).
type walk struct {
	path map[cid.Cid]bool
	jobs chan cid.Cid
}

// startAhead starts cv's workers for one Verify, if it has any, and
// returns its walk and what ends them.
func (cv *ChainVerifier) startAhead(ctx context.Context) (*walk, func()) {
	w := &walk{path: map[cid.Cid]bool{}}
	if cv.aheadWorkers <= 0 {
		return w, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	w.jobs = make(chan cid.Cid, aheadQueue)
	var wg sync.WaitGroup
	for range cv.aheadWorkers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case c := <-w.jobs:
					// An error is ctx's: the walk checks again what a
					// worker could not.
					_, _ = cv.receipt(ctx, c, w.jobs, true)
				}
			}
		})
	}
	return w, func() {
		cancel()
		wg.Wait()
		// What the workers checked that the walk did not take (it ended
		// early, or took the receipt's verdict from Verdicts) goes.
		cv.mu.Lock()
		clear(cv.ahead)
		cv.mu.Unlock()
	}
}

// receipt makes the receipt c's own checks, or takes them from a worker
// that made them. With jobs, the upstream receipts it names go to the
// workers (those Verdicts holds excepted: the walk may not need them). A
// worker (worker set) leaves a receipt that the walk or another worker
// has taken.
func (cv *ChainVerifier) receipt(ctx context.Context, c cid.Cid, jobs chan cid.Cid, worker bool) (*Verification, error) {
	if jobs == nil {
		return verifyReceipt(ctx, cv.st, c, cv.trusted, cv.known, cv.cache, &cv.nodes, nil)
	}
	send := func(ups map[cid.Cid]bool) {
		for u := range ups {
			if cv.verdicts != nil && cv.verdicts.holds(cv.keys, u) {
				continue
			}
			select {
			case jobs <- u:
			default: // the walk verifies it when it gets there
			}
		}
	}
	cv.mu.Lock()
	e, taken := cv.ahead[c]
	if !taken {
		if _, walked := cv.memo[c]; walked && worker {
			cv.mu.Unlock()
			return nil, nil
		}
		e = &aheadEntry{done: make(chan struct{})}
		if cv.ahead == nil {
			cv.ahead = map[cid.Cid]*aheadEntry{}
		}
		cv.ahead[c] = e
	}
	cv.mu.Unlock()
	if taken {
		if worker {
			return nil, nil
		}
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		cv.mu.Lock()
		delete(cv.ahead, c)
		cv.mu.Unlock()
		if e.err == nil {
			return e.v, nil
		}
		// The worker's Verify ended under it: check it here.
		return verifyReceipt(ctx, cv.st, c, cv.trusted, cv.known, cv.cache, &cv.nodes, send)
	}
	e.v, e.err = verifyReceipt(ctx, cv.st, c, cv.trusted, cv.known, cv.cache, &cv.nodes, send)
	close(e.done)
	if !worker {
		cv.mu.Lock()
		delete(cv.ahead, c)
		cv.mu.Unlock()
	}
	return e.v, e.err
}

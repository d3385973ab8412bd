package verify

import (
	"context"
	"sync"
	"time"

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

	mu   sync.Mutex
	sent map[cid.Cid]bool // what went to the workers, or past them
}

// startAhead starts cv's workers for one Verify, if it has any, and
// returns its walk and what ends them.
func (cv *ChainVerifier) startAhead(ctx context.Context) (*walk, func()) {
	w := &walk{path: map[cid.Cid]bool{}}
	if cv.aheadWorkers <= 0 {
		return w, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	w.jobs, w.sent = make(chan cid.Cid, aheadQueue), map[cid.Cid]bool{}
	var wg sync.WaitGroup
	for range cv.aheadWorkers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case c := <-w.jobs:
					if !cv.deadline.IsZero() && time.Now().After(cv.deadline) {
						return // the walk stops soon too (see Budget)
					}
					// An error is ctx's: the walk checks again what a
					// worker could not.
					_, _ = cv.receipt(ctx, c, w, true)
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
func (cv *ChainVerifier) receipt(ctx context.Context, c cid.Cid, w *walk, worker bool) (*Verification, error) {
	if w.jobs == nil {
		return cv.ownChecks(ctx, c, nil)
	}
	send := func(ups map[cid.Cid]bool) { cv.send(w, ups) }
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
		return cv.ownChecks(ctx, c, send)
	}
	e.v, e.err = cv.ownChecks(ctx, c, send)
	close(e.done)
	if !worker {
		cv.mu.Lock()
		delete(cv.ahead, c)
		cv.mu.Unlock()
	}
	return e.v, e.err
}

// ownChecks makes the receipt c's own checks (every check but "upstream
// receipts") and keeps them in cv's Verdicts, before anyone else sees
// them (the walk adds its check to them after).
func (cv *ChainVerifier) ownChecks(ctx context.Context, c cid.Cid, upstream func(map[cid.Cid]bool)) (*Verification, error) {
	v, err := verifyReceipt(ctx, cv.st, c, cv.trusted, cv.known, cv.cache, &cv.nodes, upstream)
	if err == nil && cv.verdicts != nil {
		cv.verdicts.addOwn(cv.keys, v)
	}
	return v, err
}

// send gives the workers of w the receipts ups, each once: those that
// Verdicts holds whole are left out; those whose own checks it keeps
// (held or failed) are passed through to what they name upstream.
func (cv *ChainVerifier) send(w *walk, ups map[cid.Cid]bool) {
	stack := make([]cid.Cid, 0, len(ups))
	for u := range ups {
		stack = append(stack, u)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(stack) > 0 {
		u := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if w.sent[u] {
			continue
		}
		w.sent[u] = true
		if cv.verdicts != nil {
			if cv.verdicts.holds(cv.keys, u) {
				continue
			}
			if ups, ok := cv.verdicts.keptUpstream(cv.keys, u); ok {
				stack = append(stack, ups...)
				continue
			}
		}
		select {
		case w.jobs <- u:
		default: // the walk checks it when it gets there
		}
	}
}

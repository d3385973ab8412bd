package verify

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/ipfs/go-cid"
)

// CheckUpstream is the check [VerifyReceiptChain] adds to a receipt whose
// input records upstream receipts.
const CheckUpstream = "upstream receipts"

// VerifyReceiptChain verifies receipt and, recursively, every upstream
// receipt its input packet records (the accepted receipts of a Work
// Order's nodes its input was built from), each once. It returns their
// verifications upstream first, receipt last, the receipts upstream
// checked on every core (see [ChainVerifier.Ahead]). A receipt with upstream
// receipts gets one more check, "upstream receipts": each of them must
// verify and be a PASS.
func VerifyReceiptChain(ctx context.Context, st cas.Store, receipt cid.Cid, trusted []ed25519.PublicKey) ([]*Verification, error) {
	cv := NewChainVerifier(st, trusted, nil, nil)
	cv.Ahead(runtime.GOMAXPROCS(0))
	if _, err := cv.Verify(ctx, receipt); err != nil {
		return nil, err
	}
	return cv.All(), nil
}

// ChainVerifier verifies receipts with their upstream receipts, each
// receipt once however many receipts name it, and is safe for concurrent
// use: a run's nodes can be verified on every core.
type ChainVerifier struct {
	st      cas.Store
	trusted []ed25519.PublicKey
	known   map[cid.Cid]bool
	cache   *Cache

	verdicts   *Verdicts // nil: none remembered across verifications
	keys       [sha256.Size]byte
	remembered atomic.Int64 // upstream links answered by verdicts

	aheadWorkers int                     // see Ahead
	ahead        map[cid.Cid]*aheadEntry // receipts' own checks by workers, under mu

	mu    sync.Mutex
	memo  map[cid.Cid]*chainEntry
	order []*Verification
	nodes sync.Map // untyped objects decoded, shared by the receipts
}

type chainEntry struct {
	done chan struct{}
	v    *Verification
	err  error
}

// NewChainVerifier returns a verifier of receipts in st signed by one of
// trusted. known, which may be nil and must not change afterwards, holds
// closures the caller has verified (as [VerifyReceiptKnown] takes them):
// a run's package trees, walked once instead of once per receipt. cache
// is what its verifications remember (nil: a new [Cache] of its own).
func NewChainVerifier(st cas.Store, trusted []ed25519.PublicKey, known map[cid.Cid]bool, cache *Cache) *ChainVerifier {
	if cache == nil {
		cache = NewCache()
	}
	return &ChainVerifier{st: st, trusted: trusted, known: known, cache: cache, memo: map[cid.Cid]*chainEntry{}}
}

// Remember has cv take a receipt that vs holds as verified, with the
// chain above it, instead of verifying them again, when it is upstream
// of an upstream receipt of the one asked for, and add to vs every
// receipt it verifies whole as a PASS: see [Verdicts]. The receipts cv is
// asked for, and the upstream receipts they name, are verified afresh
// all the same. Call it before the first Verify.
func (cv *ChainVerifier) Remember(vs *Verdicts) {
	cv.verdicts, cv.keys = vs, keysDigest(cv.trusted)
}

// Remembered is how many upstream links cv took as verified from the
// [Verdicts] it was given, without verifying them again.
func (cv *ChainVerifier) Remembered() int { return int(cv.remembered.Load()) }

// Verify verifies receipt and its upstream receipts, recursively, or
// returns the verification made before. A receipt that is its own
// upstream, through any number of links (impossible with honest hashes),
// fails "upstream receipts" instead of waiting for itself.
func (cv *ChainVerifier) Verify(ctx context.Context, receipt cid.Cid) (*Verification, error) {
	w, stop := cv.startAhead(ctx)
	defer stop()
	return cv.verify(ctx, receipt, w)
}

// verify verifies c, whose downstream receipts being verified on this
// goroutine are w.path (a set: a chain of thousands is checked for a
// loop at each link in constant time).
func (cv *ChainVerifier) verify(ctx context.Context, c cid.Cid, w *walk) (*Verification, error) {
	path := w.path
	if path[c] {
		return nil, nil
	}
	cv.mu.Lock()
	e, ok := cv.memo[c]
	if !ok {
		e = &chainEntry{done: make(chan struct{})}
		cv.memo[c] = e
	}
	cv.mu.Unlock()
	if ok {
		select {
		case <-e.done:
			return e.v, e.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	defer close(e.done)
	path[c] = true
	e.v, e.err = cv.verifyOne(ctx, c, w)
	delete(path, c)
	if e.err == nil {
		cv.mu.Lock()
		cv.order = append(cv.order, e.v)
		cv.mu.Unlock()
		if cv.verdicts != nil && e.v.OK() && e.v.Status == ledger.StatusPass {
			cv.verdicts.add(cv.keys, c)
		}
	}
	return e.v, e.err
}

// remembers reports whether cv takes the upstream receipt c as verified
// from its Verdicts: not when it verified c itself (or is verifying it),
// whatever it found.
func (cv *ChainVerifier) remembers(c cid.Cid, path map[cid.Cid]bool) bool {
	if cv.verdicts == nil || path[c] {
		return false
	}
	cv.mu.Lock()
	_, mine := cv.memo[c]
	cv.mu.Unlock()
	return !mine && cv.verdicts.holds(cv.keys, c)
}

func (cv *ChainVerifier) verifyOne(ctx context.Context, c cid.Cid, w *walk) (*Verification, error) {
	path := w.path
	v, err := cv.receipt(ctx, c, w.jobs, false)
	if err != nil || v.Input == nil || len(v.Input.Upstream) == 0 {
		return v, err
	}
	var probs problems
	remembered := 0
	for _, u := range v.Input.Upstream {
		// The receipt asked for and those it names are verified afresh;
		// further up, one verified before stands.
		if len(path) > 1 && cv.remembers(u.Cid, path) {
			remembered++
			continue
		}
		uv, err := cv.verify(ctx, u.Cid, w)
		switch {
		case err != nil:
			return nil, err
		case uv == nil:
			probs.add("upstream %s links back to a receipt that needs it", u.Cid)
		case !uv.OK():
			probs.add("upstream %s does not verify: %s: %s", u.Cid, uv.FirstFailure().Name, uv.FirstFailure().Detail)
		case uv.Status != ledger.StatusPass:
			probs.add("upstream %s is a %s, not a PASS", u.Cid, uv.Status)
		}
	}
	ok := fmt.Sprintf("%d upstream receipts, each verified and PASS", len(v.Input.Upstream))
	if remembered > 0 {
		cv.remembered.Add(int64(remembered))
		ok += fmt.Sprintf(" (%d of them, with the receipts upstream of them, as verified before by this verifier, not again now)", remembered)
	}
	v.Checks = append(v.Checks, probs.check(CheckUpstream, ok))
	return v, nil
}

// All returns every verification made, each receipt after its upstream
// receipts.
func (cv *ChainVerifier) All() []*Verification {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	return slices.Clone(cv.order)
}

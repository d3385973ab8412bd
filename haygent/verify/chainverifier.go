package verify

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

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

	verdicts      *Verdicts // nil: none remembered across verifications
	keys          [sha256.Size]byte
	rememberedSet map[cid.Cid]bool // receipts taken from verdicts, not checked again; under mu

	deadline time.Time    // see Budget; zero: none
	spent    atomic.Int64 // receipts checked two links or more upstream

	aheadWorkers int                     // see Ahead
	ahead        map[cid.Cid]*aheadEntry // receipts' own checks by workers, under mu

	mu    sync.Mutex
	memo  map[cid.Cid]*chainEntry
	order []*Verification
	at    map[cid.Cid]int // where in order each receipt's verification is
	nodes sync.Map        // untyped objects decoded, shared by the receipts
}

type chainEntry struct {
	done chan struct{}
	v    *Verification
	err  error
	// minDepth is the least depth (links below the receipt asked for)
	// at which the verification stands: what it took from Verdicts
	// stands only that far upstream (1 for an upstream receipt held
	// whole, 2 for its own checks). Asked for nearer, it is made again.
	minDepth int
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

// Remembered is how many upstream receipts cv took from the [Verdicts] it
// was given (verified whole, or their own checks) without checking them
// again.
func (cv *ChainVerifier) Remembered() int {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	return len(cv.rememberedSet)
}

// remember counts c as taken from Verdicts.
func (cv *ChainVerifier) remember(c cid.Cid) {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if cv.rememberedSet == nil {
		cv.rememberedSet = map[cid.Cid]bool{}
	}
	cv.rememberedSet[c] = true
}

// Verify verifies receipt and its upstream receipts, recursively, or
// returns the verification made before. A receipt that is its own
// upstream, through any number of links (impossible with honest hashes),
// fails "upstream receipts" instead of waiting for itself.
func (cv *ChainVerifier) Verify(ctx context.Context, receipt cid.Cid) (*Verification, error) {
	w, stop := cv.startAhead(ctx)
	defer stop()
	e := cv.verify(ctx, receipt, w)
	return e.v, e.err
}

// verify returns the entry of c's verification for the depth len(w.path)
// below the receipt asked for: made before, if it stands there, or made
// now. w.path is the set of receipts being verified down the chain on
// this goroutine (a chain of thousands is checked for a loop at each
// link in constant time): c among them is a loop, an entry without a
// verification.
func (cv *ChainVerifier) verify(ctx context.Context, c cid.Cid, w *walk) *chainEntry {
	if w.path[c] {
		return &chainEntry{}
	}
	depth := len(w.path)
	for {
		cv.mu.Lock()
		e, ok := cv.memo[c]
		if !ok {
			e = &chainEntry{done: make(chan struct{})}
			cv.memo[c] = e
		}
		cv.mu.Unlock()
		if !ok {
			cv.fill(ctx, c, w, e)
			return e
		}
		select {
		case <-e.done:
		case <-ctx.Done():
			return &chainEntry{err: ctx.Err()}
		}
		if e.err != nil || depth >= e.minDepth {
			return e
		}
		// Made farther upstream, with what Verdicts holds there: not
		// for here.
		cv.mu.Lock()
		if cv.memo[c] == e {
			delete(cv.memo, c)
		}
		cv.mu.Unlock()
	}
}

// fill verifies c into e, which it alone holds undone.
func (cv *ChainVerifier) fill(ctx context.Context, c cid.Cid, w *walk, e *chainEntry) {
	defer close(e.done)
	w.path[c] = true
	e.v, e.minDepth, e.err = cv.verifyOne(ctx, c, w)
	delete(w.path, c)
	if e.err != nil {
		return
	}
	cv.mu.Lock()
	if i, ok := cv.at[c]; ok {
		cv.order[i] = e.v // made again, nearer the receipt asked for
	} else {
		if cv.at == nil {
			cv.at = map[cid.Cid]int{}
		}
		cv.at[c] = len(cv.order)
		cv.order = append(cv.order, e.v)
	}
	cv.mu.Unlock()
	if cv.verdicts != nil && e.v.OK() && e.v.Status == ledger.StatusPass {
		cv.verdicts.add(cv.keys, c)
	}
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

// verifyOne verifies c, which w.path holds: its own checks, or, two links
// or more upstream of the receipt asked for, what Verdicts kept of them;
// then its upstream receipts. minDepth is as chainEntry's.
func (cv *ChainVerifier) verifyOne(ctx context.Context, c cid.Cid, w *walk) (v *Verification, minDepth int, err error) {
	path := w.path
	far := len(path) > 2 // c is two links or more upstream
	if far && !cv.checkedAhead(c) {
		if v = cv.ownRemembered(c); v != nil {
			minDepth = 2
		}
	}
	if v == nil {
		if far {
			if err := cv.overBudget(); err != nil {
				return nil, 0, err
			}
			cv.spent.Add(1)
		}
		if v, err = cv.receipt(ctx, c, w, false); err != nil {
			return nil, 0, err
		}
	}
	if v.Input == nil || len(v.Input.Upstream) == 0 {
		return v, minDepth, nil
	}
	var probs problems
	remembered := 0
	for _, u := range v.Input.Upstream {
		// The receipt asked for and those it names are verified afresh;
		// further up, one verified before stands.
		if len(path) > 1 && cv.remembers(u.Cid, path) {
			remembered++
			cv.remember(u.Cid)
			minDepth = max(minDepth, 1)
			continue
		}
		ue := cv.verify(ctx, u.Cid, w)
		uv := ue.v
		switch {
		case ue.err != nil:
			return nil, 0, ue.err
		case uv == nil:
			probs.add("upstream %s links back to a receipt that needs it", u.Cid)
		case !uv.OK():
			probs.add("upstream %s does not verify: %s: %s", u.Cid, uv.FirstFailure().Name, uv.FirstFailure().Detail)
		case uv.Status != ledger.StatusPass:
			probs.add("upstream %s is a %s, not a PASS", u.Cid, uv.Status)
		}
		minDepth = max(minDepth, ue.minDepth-1)
	}
	ok := fmt.Sprintf("%d upstream receipts, each verified and PASS", len(v.Input.Upstream))
	if remembered > 0 {
		ok += fmt.Sprintf(" (%d of them, with the receipts upstream of them, as verified before, not again now)", remembered)
	}
	v.Checks = append(v.Checks, probs.check(CheckUpstream, ok))
	return v, minDepth, nil
}

// CheckRemembered is the one check of a receipt whose own checks a
// [ChainVerifier] took from its [Verdicts] instead of making them again.
const CheckRemembered = "own checks"

// checkedAhead reports whether a worker of cv's (see Ahead) checks c, or
// has: the walk takes what it finds rather than what Verdicts kept.
func (cv *ChainVerifier) checkedAhead(c cid.Cid) bool {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	_, ok := cv.ahead[c]
	return ok
}

// ownRemembered returns the verification of c as Verdicts kept its own
// checks (held, or failed a moment ago), or nil.
func (cv *ChainVerifier) ownRemembered(c cid.Cid) *Verification {
	if cv.verdicts == nil {
		return nil
	}
	if o, ok := cv.verdicts.ownOf(cv.keys, c); ok {
		cv.remember(c)
		v := &Verification{Receipt: c, Run: o.run, Status: ledger.StatusPass, Input: &ledger.Packet{},
			Checks: []Check{{Name: CheckRemembered, OK: true, Detail: "they held when this verifier made them before; not made again now"}}}
		for _, u := range o.upstream {
			v.Input.Upstream = append(v.Input.Upstream, cas.Link{Cid: u})
		}
		return v
	}
	if b, ok := cv.verdicts.badOf(cv.keys, c); ok {
		cv.remember(c)
		v := *b
		v.Checks = slices.Clone(b.Checks)
		return &v
	}
	return nil
}

// ErrOverBudget is the error of a [ChainVerifier.Verify] that its budget
// cut short.
var ErrOverBudget = errors.New("verification cut short: its time is spent")

// Budget has cv stop, with [ErrOverBudget], once deadline has passed,
// before it checks a receipt two links or more upstream of the one it is
// asked for that its [Verdicts] does not hold (one such receipt at
// least: every Verify makes progress). Together with Remember, a page
// can verify a chain of thousands of receipts a part at a time: what it
// checked is kept, and the next Verify goes on from there. The receipt
// asked for and those it names are checked whatever the time.
func (cv *ChainVerifier) Budget(deadline time.Time) { cv.deadline = deadline }

func (cv *ChainVerifier) overBudget() error {
	if cv.deadline.IsZero() || cv.spent.Load() == 0 || time.Now().Before(cv.deadline) {
		return nil
	}
	return ErrOverBudget
}

// All returns every verification made, each receipt after its upstream
// receipts.
func (cv *ChainVerifier) All() []*Verification {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	return slices.Clone(cv.order)
}

package verify

import (
	"crypto/ed25519"
	"crypto/sha256"
	"slices"
	"sync"
	"time"

	"github.com/ipfs/go-cid"
)

// Verdicts remembers, across verifications, which receipts verified
// whole (every check held, their upstream receipts with them) as a PASS
// signed by a trusted key: a [ChainVerifier] given it (see
// [ChainVerifier.Remember]) takes a receipt found here, two links or
// more upstream of the one it is asked for, as verified instead of
// verifying it and the chain above it again. A page about the last node
// of a chain of thousands then verifies that node's receipt and the one
// it names, not the whole chain, each time.
//
// What is remembered is keyed by content: a receipt's CID names its
// bytes, which hash to it or are refused, so a receipt that verified
// verifies again, for the same trusted keys. Verdicts holds them for one
// set of trusted keys (another set empties it), and only the verified:
// a receipt that failed may verify later (a block that was missing
// arrives) and is verified again each time. What a remembered verdict
// does not see is a block damaged on disk since: the receipt a caller
// asks for and the upstream receipts it names are always verified
// afresh, and `hg verify` checks every block again.
//
// A Verdicts is safe for concurrent use; it holds at most max receipts
// (past that it is emptied and starts again).
type Verdicts struct {
	max int

	mu    sync.Mutex
	keys  [sha256.Size]byte // the digest of the trusted keys the verdicts are for
	since time.Time         // when the verdicts held were first remembered
	m     map[cid.Cid]struct{}
}

// NewVerdicts returns an empty Verdicts of at most max receipts.
func NewVerdicts(max int) *Verdicts {
	return &Verdicts{max: max, m: map[cid.Cid]struct{}{}}
}

// keysDigest names a set of trusted keys, whatever their order.
func keysDigest(trusted []ed25519.PublicKey) [sha256.Size]byte {
	ks := make([]string, len(trusted))
	for i, k := range trusted {
		ks[i] = string(k)
	}
	slices.Sort(ks)
	h := sha256.New()
	for _, k := range slices.Compact(ks) {
		h.Write([]byte{byte(len(k))})
		h.Write([]byte(k))
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// holds reports whether receipt verified whole as a PASS for the keys
// whose digest is keys.
func (vs *Verdicts) holds(keys [sha256.Size]byte, receipt cid.Cid) bool {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if vs.keys != keys {
		return false
	}
	_, ok := vs.m[receipt]
	return ok
}

// add remembers that receipt verified whole as a PASS for the keys whose
// digest is keys.
func (vs *Verdicts) add(keys [sha256.Size]byte, receipt cid.Cid) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if vs.keys != keys || len(vs.m) >= vs.max {
		vs.keys, vs.m, vs.since = keys, map[cid.Cid]struct{}{}, time.Time{}
	}
	if vs.since.IsZero() {
		vs.since = time.Now()
	}
	vs.m[receipt] = struct{}{}
}

// Since is when the oldest verdict Verdicts holds was remembered (zero if
// it holds none).
func (vs *Verdicts) Since() time.Time {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	return vs.since
}

// Len is how many receipts' verdicts it holds.
func (vs *Verdicts) Len() int {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	return len(vs.m)
}

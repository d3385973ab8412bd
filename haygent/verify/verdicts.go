package verify

import (
	"crypto/ed25519"
	"crypto/sha256"
	"slices"
	"sync"
	"time"

	"github.com/haygent/hg/haygent/ledger"
	"github.com/ipfs/go-cid"
)

// Verdicts remembers, across verifications, what a [ChainVerifier]
// given it (see [ChainVerifier.Remember]) found, for one set of trusted
// keys (another set empties it):
//
//   - the receipts verified whole (every check held, their upstream
//     receipts with them) as a PASS: one found here two links or more
//     upstream of the receipt asked for is taken as verified, with the
//     chain above it, instead of being verified again. A page about the
//     last node of a chain of thousands then verifies that node's receipt
//     and the one it names, not the whole chain, each time;
//   - the receipts whose own checks (every check but "upstream
//     receipts") held as a PASS: one that far upstream is not read again,
//     and what it names upstream is walked from here;
//   - the receipts whose own checks failed, for badFor after a walk last
//     came by: a walk cut short by its budget ([ChainVerifier.Budget])
//     goes on past them next time. One may verify later (a block that was
//     missing arrives): until then a page may call it broken when it no
//     longer is, never the other way.
//
// What is remembered is keyed by content: a receipt's CID names its
// bytes, which hash to it or are refused, so a receipt's checks find
// the same again, for the same trusted keys. What a remembered verdict
// does not see is a block damaged or removed on disk since: the receipt a
// caller asks for and the upstream receipts it names are always verified
// afresh, and `hg verify` checks every block again.
//
// A Verdicts is safe for concurrent use; it holds at most max receipts
// of each kind (past that, that kind is emptied and starts again).
type Verdicts struct {
	max int

	mu    sync.Mutex
	keys  [sha256.Size]byte // the digest of the trusted keys the verdicts are for
	since time.Time         // when the verdicts held were first remembered
	m     map[cid.Cid]struct{}
	own   map[cid.Cid]ownVerdict
	bad   map[cid.Cid]badVerdict
	// badLinks is how many upstream links the receipts in bad keep.
	badLinks int
}

// maxBadLinks bounds the upstream links the failed receipts kept hold.
const maxBadLinks = 1 << 20

// badVerdict is a receipt whose own checks did not hold as a PASS, kept
// until badFor after a walk last came by.
type badVerdict struct {
	v  *Verification // its own checks; not changed once kept
	at time.Time
}

// badFor is how long a receipt whose own checks failed is kept after a
// walk last came by.
const badFor = time.Minute

// ownVerdict is what a receipt whose own checks held leaves for the walk
// that takes it from [Verdicts]: its run and the upstream receipts its
// input names (its status is PASS).
type ownVerdict struct {
	run      string
	upstream []cid.Cid
}

// NewVerdicts returns an empty Verdicts of at most max receipts (of
// each kind).
func NewVerdicts(max int) *Verdicts {
	return &Verdicts{max: max, m: map[cid.Cid]struct{}{}, own: map[cid.Cid]ownVerdict{}, bad: map[cid.Cid]badVerdict{}}
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
	vs.forKeys(keys)
	if len(vs.m) >= vs.max {
		vs.m = map[cid.Cid]struct{}{}
	}
	vs.m[receipt] = struct{}{}
}

// forKeys empties vs when its verdicts are for other keys, and starts
// its clock. vs.mu is held.
func (vs *Verdicts) forKeys(keys [sha256.Size]byte) {
	if vs.keys != keys {
		vs.keys, vs.since = keys, time.Time{}
		vs.m, vs.own, vs.bad, vs.badLinks = map[cid.Cid]struct{}{}, map[cid.Cid]ownVerdict{}, map[cid.Cid]badVerdict{}, 0
	}
	if vs.since.IsZero() {
		vs.since = time.Now()
	}
}

// ownOf returns what receipt left when its own checks held as a PASS for
// the keys whose digest is keys.
func (vs *Verdicts) ownOf(keys [sha256.Size]byte, receipt cid.Cid) (ownVerdict, bool) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if vs.keys != keys {
		return ownVerdict{}, false
	}
	o, ok := vs.own[receipt]
	return o, ok
}

// badOf returns the own checks of receipt kept as failed, for the keys
// whose digest is keys, if a walk came by less than badFor ago.
func (vs *Verdicts) badOf(keys [sha256.Size]byte, receipt cid.Cid) (*Verification, bool) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	b, ok := vs.bad[receipt]
	if !ok || vs.keys != keys || time.Since(b.at) > badFor {
		return nil, false
	}
	// Kept while walks come by: a chain of failures that takes many
	// pages to walk does not expire behind them.
	b.at = time.Now()
	vs.bad[receipt] = b
	return b.v, true
}

// keptUpstream returns the upstream receipts receipt names when vs keeps
// its own checks, held or failed, for the keys whose digest is keys.
func (vs *Verdicts) keptUpstream(keys [sha256.Size]byte, receipt cid.Cid) ([]cid.Cid, bool) {
	if o, ok := vs.ownOf(keys, receipt); ok {
		return o.upstream, true
	}
	b, ok := vs.badOf(keys, receipt)
	if !ok || b.Input == nil {
		return nil, ok
	}
	ups := make([]cid.Cid, len(b.Input.Upstream))
	for i, l := range b.Input.Upstream {
		ups[i] = l.Cid
	}
	return ups, true
}

// addOwn remembers the own checks v of a receipt (every check but
// "upstream receipts"), for the keys whose digest is keys: as held when
// they all held and the receipt is a PASS, else as failed.
func (vs *Verdicts) addOwn(keys [sha256.Size]byte, v *Verification) {
	if !v.OK() || v.Status != ledger.StatusPass {
		b := badVerdict{v: &Verification{Receipt: v.Receipt, Run: v.Run, Status: v.Status, Checks: slices.Clone(v.Checks)}, at: time.Now()}
		if v.Input != nil {
			b.v.Input = &ledger.Packet{Upstream: slices.Clone(v.Input.Upstream)}
		}
		links := 0
		if b.v.Input != nil {
			links = len(b.v.Input.Upstream)
		}
		vs.mu.Lock()
		defer vs.mu.Unlock()
		vs.forKeys(keys)
		// Bounded by receipts and by the links they keep (a failed
		// receipt's input is anyone's making).
		if len(vs.bad) >= vs.max || vs.badLinks+links > maxBadLinks {
			vs.bad, vs.badLinks = map[cid.Cid]badVerdict{}, 0
		}
		vs.bad[v.Receipt] = b
		vs.badLinks += links
		return
	}
	o := ownVerdict{run: v.Run}
	if v.Input != nil {
		for _, u := range v.Input.Upstream {
			o.upstream = append(o.upstream, u.Cid)
		}
	}
	vs.mu.Lock()
	defer vs.mu.Unlock()
	vs.forKeys(keys)
	if len(vs.own) >= vs.max {
		vs.own = map[cid.Cid]ownVerdict{}
	}
	vs.own[v.Receipt] = o
	delete(vs.bad, v.Receipt)
}

// Since is when the oldest verdict Verdicts holds was remembered (zero if
// it holds none).
func (vs *Verdicts) Since() time.Time {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	return vs.since
}

// Checked is how many receipts' own checks it holds, held or failed.
func (vs *Verdicts) Checked() int {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	return len(vs.own) + len(vs.bad)
}

// Len is how many receipts' verdicts it holds: verified whole, and whose
// own checks held.
func (vs *Verdicts) Len() (whole, own int) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	return len(vs.m), len(vs.own)
}

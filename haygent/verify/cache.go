package verify

import (
	"crypto/sha256"
	"sync"

	"github.com/haygent/hg/haygent/gate"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/ipfs/go-cid"
)

// Cache is what the verifications that share it remember: the signatures
// made or checked ([ledger.Signatures]), the gates of packages by the
// package tree's CID, and compiled gates by the digest of the gates.json
// they came from. Whoever verifies owns one (a scheduler, a
// [ChainVerifier]) and hands its Signatures to the runtime it runs; two
// verifiers share what they trust only when they are given the same
// Cache. Everything in it is keyed by content (CIDs, digests), so a hit
// is the same answer the full check gives. A Cache is safe for concurrent
// use.
type Cache struct {
	sigs *ledger.Signatures

	mu       sync.Mutex
	packages map[cid.Cid]packageGateSet // immutable once stored
	compiled map[[sha256.Size]byte][]compiledGate
}

// cacheMax bounds the package and compiled-gate maps: past it a map is
// emptied and starts again.
const cacheMax = 256

// NewCache returns an empty Cache.
func NewCache() *Cache { return &Cache{sigs: ledger.NewSignatures()} }

// Signatures is the signature cache of c, for the runtime whose receipts
// c's verifications check.
func (c *Cache) Signatures() *ledger.Signatures { return c.sigs }

// Len is how many packages' gates and compiled gate files c holds.
func (c *Cache) Len() (packages, compiled int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.packages), len(c.compiled)
}

type packageGateSet struct {
	specs    []gate.Spec
	compiled []compiledGate
	check    Check
}

func (c *Cache) packageGates(pkg cid.Cid) (packageGateSet, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	set, ok := c.packages[pkg]
	return set, ok
}

func (c *Cache) addPackageGates(pkg cid.Cid, set packageGateSet) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.packages == nil || len(c.packages) >= cacheMax {
		c.packages = map[cid.Cid]packageGateSet{}
	}
	c.packages[pkg] = set
}

// compileGates compiles the gates specs parsed from data, once per
// distinct gates.json: compiling CEL costs far more than evaluating it,
// and a scheduler verifies many receipts of the same package. Compiled
// gates are immutable.
func (c *Cache) compileGates(data []byte, specs []gate.Spec) []compiledGate {
	key := sha256.Sum256(data)
	c.mu.Lock()
	hit, ok := c.compiled[key]
	c.mu.Unlock()
	if ok {
		return hit
	}
	out := make([]compiledGate, len(specs))
	for i, s := range specs {
		out[i].g, out[i].err = gate.Compile(s)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.compiled == nil || len(c.compiled) >= cacheMax {
		c.compiled = map[[sha256.Size]byte][]compiledGate{}
	}
	c.compiled[key] = out
	return out
}

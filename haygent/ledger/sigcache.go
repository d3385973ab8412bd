package ledger

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"sync"

	"github.com/ipfs/go-cid"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/internal/sigcheck"
)

// Signatures known to be good. Checking an ed25519 signature is the largest
// single cost of accepting a receipt, and a scheduler checks every receipt
// its own runtime signed a moment before; a verifier of a chain meets the
// same upstream receipts again. So this process remembers the signatures it
// made and the ones it has checked, keyed by a SHA-256 over the key, the
// signature and the message, and a repeated check costs one hash.
//
// Only a signature this process made, or one that verified (alone or in a
// batch, under the one rule of package sigcheck), is ever added, so a
// forged or altered object always meets the real check: a changed
// message, signature or key is a different entry. The cache lives in
// memory only; a verifier on another machine checks everything.
var goodSigs = sigCache{m: map[[sha256.Size]byte]struct{}{}}

// sigCacheMax bounds the cache. When it is full an arbitrary entry goes:
// the hits that matter come moments after the signing.
const sigCacheMax = 1 << 14

type sigCache struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]struct{}
}

// sigKey hashes the key, the signature and the message. The key and the
// signature have fixed sizes (the callers check), so the concatenation
// is unambiguous.
func sigKey(pub ed25519.PublicKey, msg, sig []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write(pub)
	h.Write(sig)
	h.Write(msg)
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

func (c *sigCache) has(k [sha256.Size]byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.m[k]
	return ok
}

func (c *sigCache) add(k [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= sigCacheMax {
		for old := range c.m {
			delete(c.m, old)
			break
		}
	}
	c.m[k] = struct{}{}
}

// sign signs msg with key and remembers the signature as good, when the
// key's public half is the one its seed makes: ed25519.Sign does not check
// that, and a key whose halves disagree makes signatures that do not verify
// under the public key it carries.
func sign(key ed25519.PrivateKey, msg []byte) []byte {
	sig := ed25519.Sign(key, msg)
	if consistentKey(key) {
		goodSigs.add(sigKey(key.Public().(ed25519.PublicKey), msg, sig))
	}
	return sig
}

// checkedKeys remembers which private keys have a public half derived from
// their seed, so that the check costs one derivation per key.
var checkedKeys sync.Map // string(private key) -> bool

func consistentKey(key ed25519.PrivateKey) bool {
	if len(key) != ed25519.PrivateKeySize {
		return false
	}
	if ok, found := checkedKeys.Load(string(key)); found {
		return ok.(bool)
	}
	derived := ed25519.NewKeyFromSeed(key.Seed())
	ok := string(derived[32:]) == string(key[32:])
	checkedKeys.Store(string(key), ok)
	return ok
}

// verifySig reports whether sig is pub's signature of msg: from the cache
// when this process made or checked the same signature before, otherwise
// by ed25519 (sigcheck's rule), remembering a signature that verifies.
func verifySig(pub ed25519.PublicKey, msg, sig []byte) bool {
	if len(pub) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
		return false
	}
	k := sigKey(pub, msg, sig)
	if goodSigs.has(k) {
		return true
	}
	if !sigcheck.Verify(pub, msg, sig) {
		return false
	}
	goodSigs.add(k)
	return true
}

// goodReceipts remembers receipts, by CID, whose signature a batch has
// verified: a CID names the block's bytes, signer and signature included,
// so the receipt's own check needs neither its signing bytes cut out nor
// a digest of them.
var goodReceipts = sigCache{m: map[[sha256.Size]byte]struct{}{}}

func receiptKey(c cid.Cid) [sha256.Size]byte { return sha256.Sum256([]byte(c.KeyString())) }

// PrecheckSignatures verifies the signatures of the receipts rs as one
// batch, several times faster than one by one, and remembers the receipts
// as signed when the batch holds, so that verifying each receipt next
// finds its signature checked. It decides nothing itself: when the batch
// fails, or a block cannot be read or is not a signed map, nothing is
// remembered and each receipt's own check finds and names what is wrong.
// rs should be far fewer than the cache holds (a few dozen).
func PrecheckSignatures(ctx context.Context, st cas.Store, rs []cid.Cid) {
	var batch sigcheck.Batch
	keys := make([][sha256.Size]byte, 0, len(rs))
	for _, c := range rs {
		k := receiptKey(c)
		if goodReceipts.has(k) {
			continue
		}
		err := st.View(ctx, c, func(data []byte) error {
			pub, ok1 := cas.BytesEntry(data, "signer")
			sig, ok2 := cas.BytesEntry(data, "signature")
			msg, ok3 := cas.WithoutEntry(data, "signature")
			if !ok1 || !ok2 || !ok3 || len(pub) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
				return nil
			}
			batch.Add(pub, msg, sig)
			keys = append(keys, k)
			return nil
		})
		if err != nil && ctx.Err() != nil {
			return
		}
	}
	if len(keys) == 0 || !batch.Verify() {
		return
	}
	for _, k := range keys {
		goodReceipts.add(k)
	}
}

// signedReceipt reports whether a batch has verified the signature of the
// receipt c (see [PrecheckSignatures]).
func SignedReceipt(c cid.Cid) bool { return goodReceipts.has(receiptKey(c)) }

// ForgetSignatures drops every signature this process remembers as good,
// so that the checks that follow run ed25519 in full, as a verifier on
// another machine does. Benchmarks of verification call it.
func ForgetSignatures() {
	for _, c := range []*sigCache{&goodSigs, &goodReceipts} {
		c.mu.Lock()
		c.m = map[[sha256.Size]byte]struct{}{}
		c.mu.Unlock()
	}
}

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

// Signatures remembers signatures known to be good. Checking an ed25519
// signature is the largest single cost of accepting a receipt, and a
// scheduler checks every receipt its own runtime signed a moment before; a
// verifier of a chain meets the same upstream receipts again. So whoever
// verifies (a scheduler, a [verify.ChainVerifier]) owns a Signatures, hands
// it to the runtime it runs, and remembers the signatures made and checked,
// keyed by a SHA-256 over the key, the signature and the message: a
// repeated check costs one hash. Two verifiers share what they trust only
// when they are given the same value.
//
// Only a signature made through it with a consistent key, or one that
// verified (alone or in a batch, under the one rule of package sigcheck),
// is ever added, so a forged or altered object always meets the real
// check: a changed message, signature or key is a different entry. It
// lives in memory only; a verifier on another machine checks everything.
//
// A nil *Signatures remembers nothing: every check runs ed25519 in full.
// A Signatures is safe for concurrent use.
type Signatures struct {
	sigs     sigCache // signatures made or checked
	receipts sigCache // receipts, by CID, whose signature a batch verified
	keys     sync.Map // string(private key) -> bool: its public half is its seed's
}

// NewSignatures returns an empty Signatures.
func NewSignatures() *Signatures {
	return &Signatures{sigs: sigCache{m: map[[sha256.Size]byte]struct{}{}}, receipts: sigCache{m: map[[sha256.Size]byte]struct{}{}}}
}

// Len is how many signatures and batch-checked receipts s remembers.
func (s *Signatures) Len() (signatures, receipts int) {
	if s == nil {
		return 0, 0
	}
	return s.sigs.len(), s.receipts.len()
}

// sigCacheMax bounds each cache. When it is full an arbitrary entry goes:
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

func (c *sigCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
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

// sign signs msg with key and, when s is not nil, remembers the signature
// as good if the key's public half is the one its seed makes: ed25519.Sign
// does not check that, and a key whose halves disagree makes signatures
// that do not verify under the public key it carries.
func (s *Signatures) sign(key ed25519.PrivateKey, msg []byte) []byte {
	sig := ed25519.Sign(key, msg)
	if s != nil && s.consistentKey(key) {
		s.sigs.add(sigKey(key.Public().(ed25519.PublicKey), msg, sig))
	}
	return sig
}

// consistentKey reports whether key's public half is derived from its
// seed, remembering the answer so that the check costs one derivation per
// key.
func (s *Signatures) consistentKey(key ed25519.PrivateKey) bool {
	if len(key) != ed25519.PrivateKeySize {
		return false
	}
	if ok, found := s.keys.Load(string(key)); found {
		return ok.(bool)
	}
	derived := ed25519.NewKeyFromSeed(key.Seed())
	ok := string(derived[32:]) == string(key[32:])
	s.keys.Store(string(key), ok)
	return ok
}

// Verify reports whether sig is pub's signature of msg: from s when it
// made or checked the same signature before, otherwise by ed25519
// (sigcheck's rule), remembering a signature that verifies.
func (s *Signatures) Verify(pub ed25519.PublicKey, msg, sig []byte) bool {
	if len(pub) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
		return false
	}
	if s == nil {
		return sigcheck.Verify(pub, msg, sig)
	}
	k := sigKey(pub, msg, sig)
	if s.sigs.has(k) {
		return true
	}
	if !sigcheck.Verify(pub, msg, sig) {
		return false
	}
	s.sigs.add(k)
	return true
}

func receiptKey(c cid.Cid) [sha256.Size]byte { return sha256.Sum256([]byte(c.KeyString())) }

// PrecheckReceipts verifies the signatures of the receipts rs as one
// batch, several times faster than one by one, and remembers the receipts
// as signed when the batch holds, so that verifying each receipt next
// finds its signature checked ([Signatures.ReceiptSigned]). It decides
// nothing itself: when the batch fails, or a block cannot be read or is
// not a signed map, nothing is remembered and each receipt's own check
// finds and names what is wrong. rs should be far fewer than the cache
// holds (a few dozen). On a nil s it does nothing.
func (s *Signatures) PrecheckReceipts(ctx context.Context, st cas.BlockReader, rs []cid.Cid) {
	if s == nil {
		return
	}
	var batch sigcheck.Batch
	keys := make([][sha256.Size]byte, 0, len(rs))
	for _, c := range rs {
		k := receiptKey(c)
		if s.receipts.has(k) {
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
		s.receipts.add(k)
	}
}

// ReceiptSigned reports whether a batch has verified the signature of the
// receipt c ([Signatures.PrecheckReceipts]): a CID names the block's
// bytes, signer and signature included, so the receipt's own check needs
// neither its signing bytes cut out nor a digest of them.
func (s *Signatures) ReceiptSigned(c cid.Cid) bool {
	return s != nil && s.receipts.has(receiptKey(c))
}

package ledger

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"slices"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
)

func newKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// The cache may only ever answer yes for the exact key, message and
// signature that were made or checked; everything else meets ed25519.
func TestSigCacheAnswersOnlyForWhatWasSigned(t *testing.T) {
	key, other := newKey(t), newKey(t)
	pub := key.Public().(ed25519.PublicKey)
	msg := []byte("receipt bytes")
	s := NewSignatures()
	sig := s.sign(key, msg)
	if !s.sigs.has(sigKey(pub, msg, sig)) {
		t.Fatal("a signature made through the cache is not remembered")
	}
	if !s.Verify(pub, msg, sig) {
		t.Fatal("own signature does not verify")
	}
	flipped := append([]byte(nil), sig...)
	flipped[10] ^= 1
	for name, c := range map[string]struct {
		pub      ed25519.PublicKey
		msg, sig []byte
	}{
		"altered message":   {pub, []byte("receipt bytez"), sig},
		"altered signature": {pub, msg, flipped},
		"other key":         {other.Public().(ed25519.PublicKey), msg, sig},
		"short signature":   {pub, msg, sig[:63]},
		"short key":         {pub[:31], msg, sig},
	} {
		// Twice: a refused signature must not be remembered either.
		for range 2 {
			if s.Verify(c.pub, c.msg, c.sig) {
				t.Errorf("%s: verifies", name)
			}
		}
	}
}

// A signature made elsewhere is checked by ed25519, then remembered.
func TestSigCacheRemembersCheckedSignatures(t *testing.T) {
	key := newKey(t)
	pub := key.Public().(ed25519.PublicKey)
	msg := []byte("made by another process")
	sig := ed25519.Sign(key, msg)
	k := sigKey(pub, msg, sig)
	s := NewSignatures()
	if s.sigs.has(k) {
		t.Fatal("remembered before it was checked")
	}
	if !s.Verify(pub, msg, sig) {
		t.Fatal("a good signature does not verify")
	}
	if !s.sigs.has(k) {
		t.Fatal("a checked signature is not remembered")
	}
	if n, _ := s.Len(); n != 1 {
		t.Fatalf("Len = %d signatures, want 1", n)
	}
}

// Two caches share nothing: what one made or checked, the other checks in
// full; and a nil cache remembers nothing yet checks as well.
func TestSignaturesAreNotShared(t *testing.T) {
	key := newKey(t)
	pub := key.Public().(ed25519.PublicKey)
	msg := []byte("signed through one cache")
	a, b := NewSignatures(), NewSignatures()
	sig := a.sign(key, msg)
	if n, _ := b.Len(); n != 0 {
		t.Fatalf("the other cache holds %d signatures", n)
	}
	if !b.Verify(pub, msg, sig) {
		t.Fatal("the other cache refuses a good signature")
	}
	bad := append([]byte(nil), sig...)
	bad[5] ^= 1
	var none *Signatures
	if none.Verify(pub, msg, bad) || !none.Verify(pub, msg, sig) {
		t.Fatal("a nil cache decides wrongly")
	}
	if n, r := none.Len(); n != 0 || r != 0 {
		t.Fatal("a nil cache holds something")
	}
	_ = none.sign(key, msg)
	if none.ReceiptSigned(cas.Sum(cas.DagCBOR, msg)) {
		t.Fatal("a nil cache says a receipt is signed")
	}
}

func TestSigCacheIsBounded(t *testing.T) {
	c := sigCache{m: map[[32]byte]struct{}{}}
	for i := range sigCacheMax + 100 {
		var k [32]byte
		k[0], k[1], k[2] = byte(i), byte(i>>8), byte(i>>16)
		c.add(k)
	}
	if len(c.m) != sigCacheMax {
		t.Fatalf("cache holds %d entries, want %d", len(c.m), sigCacheMax)
	}
}

// A private key whose public half is someone else's makes signatures that
// do not verify under that public key; signing with it must not teach the
// cache otherwise.
func TestSigCacheIgnoresInconsistentKeys(t *testing.T) {
	mine, victim := newKey(t), newKey(t)
	bad := append(ed25519.PrivateKey(nil), mine.Seed()...)
	bad = append(bad, victim.Public().(ed25519.PublicKey)...)
	msg := []byte("a receipt claiming the victim signed it")
	s := NewSignatures()
	sig := s.sign(bad, msg)
	if s.Verify(victim.Public().(ed25519.PublicKey), msg, sig) {
		t.Fatal("a signature by a key with a borrowed public half verifies")
	}
	if s.consistentKey(bad) || !s.consistentKey(mine) {
		t.Fatal("consistentKey is wrong")
	}
}

// signedBlocks stores n signed maps shaped like receipts, signed outside
// the process's memory of signatures, and returns their CIDs.
func signedBlocks(t *testing.T, st cas.Store, key ed25519.PrivateKey, n int, alter func(i int, sig []byte)) []cid.Cid {
	t.Helper()
	var out []cid.Cid
	for i := range n {
		m := map[string]any{"type": TypeReceipt, "run": fmt.Sprint("run-", i), "signer": []byte(key.Public().(ed25519.PublicKey))}
		msg, err := cas.EncodeNode(m)
		if err != nil {
			t.Fatal(err)
		}
		sig := ed25519.Sign(key, msg)
		alter(i, sig)
		m["signature"] = sig
		data, err := cas.EncodeNode(m)
		if err != nil {
			t.Fatal(err)
		}
		b := cas.NewBlock(cas.DagCBOR, data)
		if err := st.Put(context.Background(), b); err != nil {
			t.Fatal(err)
		}
		out = append(out, b.CID())
	}
	return out
}

func remembered(s *Signatures, rs []cid.Cid) []bool {
	var out []bool
	for _, c := range rs {
		out = append(out, s.ReceiptSigned(c))
	}
	return out
}

// A batch that holds remembers every receipt in it; one bad signature
// makes it remember none, and the bad one still fails its own check.
func TestPrecheckSignatures(t *testing.T) {
	s := NewSignatures()
	ctx := context.Background()
	st := memstore.New()
	key := newKey(t)
	good := signedBlocks(t, st, key, 5, func(int, []byte) {})
	missing := cas.Sum(cas.DagCBOR, []byte("not stored"))
	s.PrecheckReceipts(ctx, st, append(good, missing))
	if got := remembered(s, good); slices.Contains(got, false) {
		t.Fatalf("after a good batch, remembered %v", got)
	}
	if s.ReceiptSigned(missing) {
		t.Fatal("a receipt that cannot be read is remembered")
	}

	s = NewSignatures()
	bad := signedBlocks(t, st, key, 5, func(i int, sig []byte) {
		if i == 3 {
			sig[40] ^= 1
		}
	})
	s.PrecheckReceipts(ctx, st, bad)
	if got := remembered(s, bad); slices.Contains(got, true) {
		t.Fatalf("after a batch with a bad signature, remembered %v", got)
	}
	for i, c := range bad {
		err := st.View(ctx, c, func(data []byte) error {
			pub, _ := cas.BytesEntry(data, "signer")
			sig, _ := cas.BytesEntry(data, "signature")
			msg, _ := cas.WithoutEntry(data, "signature")
			if ok := s.Verify(pub, msg, sig); ok != (i != 3) {
				t.Errorf("receipt %d: its own check says %v", i, ok)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

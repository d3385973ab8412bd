package sigcheck

import (
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"

	"filippo.io/edwards25519"
)

type signed struct{ pub, msg, sig []byte }

// signatures returns n signatures by crypto/ed25519 over messages of
// several lengths, by keys keys.
func signatures(t testing.TB, n, keys int) []signed {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	privs := make([]ed25519.PrivateKey, keys)
	for i := range privs {
		seed := make([]byte, ed25519.SeedSize)
		for j := range seed {
			seed[j] = byte(rng.Uint32())
		}
		privs[i] = ed25519.NewKeyFromSeed(seed)
	}
	out := make([]signed, n)
	for i := range out {
		msg := make([]byte, rng.IntN(300))
		for j := range msg {
			msg[j] = byte(rng.Uint32())
		}
		k := privs[i%keys]
		out[i] = signed{k.Public().(ed25519.PublicKey), msg, ed25519.Sign(k, msg)}
	}
	return out
}

func batchOf(list []signed) *Batch {
	var b Batch
	for _, s := range list {
		b.Add(s.pub, s.msg, s.sig)
	}
	return &b
}

func TestValidSignaturesVerify(t *testing.T) {
	list := signatures(t, 100, 3)
	for i, s := range list {
		if !Verify(s.pub, s.msg, s.sig) {
			t.Fatalf("signature %d does not verify", i)
		}
	}
	for _, n := range []int{0, 1, 2, 7, 100} {
		if b := batchOf(list[:n]); !b.Verify() || b.Len() != n {
			t.Errorf("a batch of %d valid signatures: Verify false or Len %d", n, b.Len())
		}
	}
}

// Every change to a key, a message or a signature is refused, by Verify
// as by crypto/ed25519, and it fails any batch it is in.
func TestAlteredSignaturesFail(t *testing.T) {
	list := signatures(t, 40, 2)
	alter := []struct {
		name string
		f    func(s *signed, bit int)
	}{
		{"sig", func(s *signed, bit int) { s.sig[bit/8%64] ^= 1 << (bit % 8) }},
		{"pub", func(s *signed, bit int) { s.pub[bit/8%32] ^= 1 << (bit % 8) }},
		{"msg", func(s *signed, bit int) {
			if len(s.msg) == 0 {
				s.msg = []byte{0}
				return
			}
			s.msg[bit/8%len(s.msg)] ^= 1 << (bit % 8)
		}},
	}
	for _, a := range alter {
		checked := 0
		for bit := range 512 {
			i := bit % len(list)
			s := signed{clone(list[i].pub), clone(list[i].msg), clone(list[i].sig)}
			a.f(&s, bit)
			if ed25519.Verify(s.pub, s.msg, s.sig) {
				continue // a change crypto/ed25519 does not see either
			}
			checked++
			if Verify(s.pub, s.msg, s.sig) {
				t.Fatalf("%s bit %d of signature %d: Verify accepts what crypto/ed25519 refuses", a.name, bit, i)
			}
			batch := append(append([]signed{}, list[:i]...), s)
			batch = append(batch, list[i+1:]...)
			if batchOf(batch).Verify() {
				t.Fatalf("%s bit %d of signature %d: the batch accepts it", a.name, bit, i)
			}
		}
		if checked < 500 {
			t.Errorf("%s: only %d of 512 changes were refused by crypto/ed25519", a.name, checked)
		}
	}
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// S must be below the group order: S + L is the same scalar, and
// crypto/ed25519 refuses it as malleable.
func TestNonCanonicalSIsRefused(t *testing.T) {
	s := signatures(t, 1, 1)[0]
	var sc edwards25519.Scalar
	if _, err := sc.SetCanonicalBytes(s.sig[32:]); err != nil {
		t.Fatal(err)
	}
	// L in little-endian; S + L still fits in 256 bits for any S < L.
	l, _ := hex.DecodeString("edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010")
	sig := clone(s.sig)
	carry := 0
	for i := range 32 {
		v := int(sig[32+i]) + int(l[i]) + carry
		sig[32+i], carry = byte(v), v>>8
	}
	if ed25519.Verify(s.pub, s.msg, sig) || Verify(s.pub, s.msg, sig) || batchOf([]signed{{s.pub, s.msg, sig}}).Verify() {
		t.Error("S + L accepted")
	}
}

// The identity key verifies the signature (R = identity, S = 0) of any
// message, under crypto/ed25519 as here; R's non-canonical encoding
// (y = p + 1) is refused by both.
func TestRMustBeCanonical(t *testing.T) {
	identity := make([]byte, 32)
	identity[0] = 1
	sig := make([]byte, 64)
	sig[0] = 1
	msg := []byte("any")
	if !ed25519.Verify(identity, msg, sig) || !Verify(identity, msg, sig) {
		t.Fatal("the canonical case does not verify")
	}
	nonCanonical := clone(sig)
	copy(nonCanonical, []byte{0xee, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	if ed25519.Verify(identity, msg, nonCanonical) {
		t.Fatal("crypto/ed25519 accepts y = p + 1")
	}
	if Verify(identity, msg, nonCanonical) || batchOf([]signed{{identity, msg, nonCanonical}}).Verify() {
		t.Error("R encoded as y = p + 1 accepted")
	}
	// The sign bit on the identity's y = 1: x = 0 has no negative.
	signed1 := clone(sig)
	signed1[31] |= 0x80
	if ed25519.Verify(identity, msg, signed1) || Verify(identity, msg, signed1) {
		t.Error("R = identity with the sign bit set accepted")
	}
}

// yMinusOne encodes y = p - 1, whose x is 0.
var yMinusOne = [32]byte{0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}

func TestCanonicalPoint(t *testing.T) {
	p := [32]byte{0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}
	for _, c := range []struct {
		b    [32]byte
		want bool
	}{
		{[32]byte{1}, true},
		{p, false},                   // y = p
		{yMinusOne, true},            // y = p - 1, x = 0, sign clear
		{[32]byte{0xec, 0xfe}, true}, // some small y
	} {
		if got := canonicalPoint(c.b[:]); got != c.want {
			t.Errorf("canonicalPoint(%x) = %v, want %v", c.b, got, c.want)
		}
	}
	m1 := yMinusOne
	m1[31] |= 0x80
	if canonicalPoint(m1[:]) {
		t.Error("y = p - 1 with the sign bit set is canonical")
	}
	// Every y from p to 2^255 - 1 is refused, with or without sign.
	for low := 0xed; low <= 0xff; low++ {
		y := p
		y[0] = byte(low)
		if canonicalPoint(y[:]) {
			t.Errorf("y = p + %d is canonical", low-0xed)
		}
		y[31] |= 0x80
		if canonicalPoint(y[:]) {
			t.Errorf("y = p + %d with the sign bit is canonical", low-0xed)
		}
	}
	// Canonical encodings of real points agree with their re-encoding.
	for i := range 50 {
		var s edwards25519.Scalar
		seed := sha512.Sum512([]byte(fmt.Sprint(i)))
		s.SetUniformBytes(seed[:])
		b := new(edwards25519.Point).ScalarBaseMult(&s).Bytes()
		if !canonicalPoint(b) {
			t.Fatalf("the encoding %x of a point is not canonical", b)
		}
	}
}

// The one place this rule and crypto/ed25519 part: the key's holder can
// give R a small-order component, which the cofactor removes. Verify and
// Batch agree on it, whatever the batch's random coefficients.
func TestSmallOrderComponentInR(t *testing.T) {
	seed := sha512.Sum512([]byte("holder"))
	var a edwards25519.Scalar
	if _, err := a.SetBytesWithClamping(seed[:32]); err != nil {
		t.Fatal(err)
	}
	pub := new(edwards25519.Point).ScalarBaseMult(&a).Bytes()
	// A point of order 8.
	torsion, _ := hex.DecodeString("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a")
	t8, err := new(edwards25519.Point).SetBytes(torsion)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("receipt")
	var r edwards25519.Scalar
	rs := sha512.Sum512([]byte("nonce"))
	r.SetUniformBytes(rs[:])
	R := new(edwards25519.Point).ScalarBaseMult(&r)
	R.Add(R, t8)
	rb := R.Bytes()
	h := sha512.New()
	h.Write(rb)
	h.Write(pub)
	h.Write(msg)
	var k edwards25519.Scalar
	k.SetUniformBytes(h.Sum(nil))
	var s edwards25519.Scalar
	s.MultiplyAdd(&k, &a, &r)
	sig := append(rb, s.Bytes()...)

	if ed25519.Verify(pub, msg, sig) {
		t.Fatal("crypto/ed25519 accepts it: the test does not build what it means to")
	}
	if !Verify(pub, msg, sig) {
		t.Error("Verify refuses it")
	}
	valid := signatures(t, 9, 1)
	for range 32 {
		if !batchOf(append([]signed{{pub, msg, sig}}, valid...)).Verify() {
			t.Fatal("a batch refuses what Verify accepts")
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	list := signatures(b, 64, 1)
	b.Run("crypto-ed25519", func(b *testing.B) {
		for i := range b.N {
			s := list[i%len(list)]
			ed25519.Verify(s.pub, s.msg, s.sig)
		}
	})
	b.Run("single", func(b *testing.B) {
		for i := range b.N {
			s := list[i%len(list)]
			Verify(s.pub, s.msg, s.sig)
		}
	})
	for _, n := range []int{16, 64} {
		b.Run(fmt.Sprintf("batch-%d", n), func(b *testing.B) {
			for range b.N {
				if !batchOf(list[:n]).Verify() {
					b.Fatal("refused")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/sig")
		})
	}
}

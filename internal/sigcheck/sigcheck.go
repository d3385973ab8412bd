// Package sigcheck verifies ed25519 signatures one at a time or many at
// once, under one rule, so that a signature's verdict does not depend on
// which of the two checked it.
//
// A signature R || S of a message M by a key A, each of R, S and A 32
// bytes, is valid when:
//
//   - A decodes to a curve point, its encoding canonical or not (y at or
//     above p = 2^255 - 19, or the sign bit set on x = 0), as crypto/ed25519
//     decodes it;
//   - R is the canonical encoding of a curve point: y below p, and the sign
//     bit clear when x is 0 (crypto/ed25519 requires this too, by comparing
//     bytes);
//   - S is a canonical scalar, below the group order L;
//   - [8]([S]B - R - [k]A) is the identity, k being SHA-512(R || A || M),
//     over the bytes as given, reduced modulo L.
//
// crypto/ed25519 checks [S]B - [k]A = R without the factor 8. The two agree
// on every signature crypto/ed25519 makes and on every forgery attempt by
// someone without the private key; they differ only on signatures whose R
// or key the key's holder built with a small-order component on purpose,
// which this rule accepts. Batch verification needs the factor: without
// it, a random linear combination of such signatures can cancel their
// small-order parts, and the verdict would depend on chance (see "Taming
// the many EdDSAs", Chalkias, Garillot and Nikolaenko, 2020).
//
// Zcash's ZIP 215 shares the cofactored equation, for the same reason,
// the non-canonical encodings of A and the canonical S, but accepts
// non-canonical encodings of R as well: this rule refuses 84 of ZIP 215's
// 196 test vectors, the 6 non-canonical R among them with each of the 14
// keys, and accepts the other 112 (TestZIP215). Its Go implementation,
// github.com/hdevalence/ed25519consensus, is not used for that reason and
// for its batch, which decodes each signature's key again and gives each
// its own term where a Batch here sums the terms of one key: for 64
// signatures by one key, the usual batch of a run, it took 29.7-32.5 µs a
// signature against 13.3-14.3 µs here (docs/performance.md).
package sigcheck

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"

	"filippo.io/edwards25519"
	"filippo.io/edwards25519/field"
)

// Verify reports whether sig is a valid signature of msg by pub.
func Verify(pub, msg, sig []byte) bool {
	var a edwards25519.Point
	var e entry
	if _, err := a.SetBytes(pub); err != nil || !e.parse(pub, msg, sig) {
		return false
	}
	// [S]B - [k]A - R.
	var p edwards25519.Point
	p.VarTimeDoubleScalarBaseMult(&e.k, a.Negate(&a), &e.s)
	return smallOrder(p.Subtract(&p, &e.r))
}

// smallOrder reports whether [8]p is the identity.
func smallOrder(p *edwards25519.Point) bool {
	return p.MultByCofactor(p).Equal(edwards25519.NewIdentityPoint()) == 1
}

// entry is one signature, decoded, less its key.
type entry struct {
	r    edwards25519.Point
	s, k edwards25519.Scalar
	key  int // the index of its key in Batch.keys
}

// parse decodes R and S from sig and computes k, reporting whether sig is
// well formed under the rule of the package. pub is 32 bytes.
func (e *entry) parse(pub, msg, sig []byte) bool {
	if len(sig) != ed25519.SignatureSize || !canonicalPoint(sig[:32]) {
		return false
	}
	if _, err := e.r.SetBytes(sig[:32]); err != nil {
		return false
	}
	if _, err := e.s.SetCanonicalBytes(sig[32:]); err != nil {
		return false
	}
	h := sha512.New()
	h.Write(sig[:32])
	h.Write(pub)
	h.Write(msg)
	var digest [sha512.Size]byte
	_, err := e.k.SetUniformBytes(h.Sum(digest[:0]))
	return err == nil // it is: the digest has the 64 bytes needed
}

// canonicalPoint reports whether b, 32 bytes, is the canonical encoding of
// a y coordinate and a sign: y below p, and the sign bit clear when x is
// 0, which is when y² = 1. It does not check that a point with that y
// exists; decoding does.
func canonicalPoint(b []byte) bool {
	var y, y2 field.Element
	y.SetBytes(b) // the sign bit ignored, y reduced modulo p
	enc := y.Bytes()
	enc[31] |= b[31] & 0x80
	if !bytes.Equal(enc, b) {
		return false // y is p or above
	}
	return b[31]&0x80 == 0 || y2.Square(&y).Equal(new(field.Element).One()) == 0
}

// Batch collects signatures and verifies them together, at a fraction of
// the cost of verifying each: one multi-scalar multiplication checks a
// random linear combination of their equations.
type Batch struct {
	entries []entry
	// A batch usually holds one runner's signatures: each key is decoded
	// once, and its terms summed into one.
	keys  []edwards25519.Point
	keyOf map[string]int // a key's bytes to its index in keys
	bad   bool           // an entry did not even parse
}

// Add adds pub's signature sig of msg to the batch. The batch keeps no
// reference to the slices.
func (b *Batch) Add(pub, msg, sig []byte) {
	i, ok := b.keyOf[string(pub)]
	if !ok {
		var a edwards25519.Point
		if _, err := a.SetBytes(pub); err != nil {
			b.bad = true
			return
		}
		if b.keyOf == nil {
			b.keyOf = map[string]int{}
		}
		i = len(b.keys)
		b.keyOf[string(pub)] = i
		b.keys = append(b.keys, a)
	}
	e := entry{key: i}
	if !e.parse(pub, msg, sig) {
		b.bad = true
		return
	}
	b.entries = append(b.entries, e)
}

// Len returns the number of signatures added.
func (b *Batch) Len() int { return len(b.entries) }

// Verify reports whether every signature added is valid. When it returns
// true, each would pass [Verify] except with probability below 2^-120;
// when it returns false, at least one fails [Verify], and only checking
// each one says which.
func (b *Batch) Verify() bool {
	if b.bad {
		return false
	}
	// With z_i random 128-bit scalars, Σ z_i ([S_i]B - R_i - [k_i]A_i) is
	// zero for valid signatures. It is computed, the sign flipped, as one
	// multi-scalar multiplication, the terms of a key summed into one:
	// Σ [z_i]R_i + Σ over keys [Σ z_i k_i]A - [Σ z_i S_i]B, times 8.
	n, m := len(b.entries), len(b.keys)
	scalars := make([]edwards25519.Scalar, n+m+1) // z_i, then Σ z_i k_i, then Σ z_i S_i
	sPtrs := make([]*edwards25519.Scalar, n+m+1)
	points := make([]*edwards25519.Point, n+m+1)
	random := make([]byte, 16*n)
	rand.Read(random)
	sumS := &scalars[n+m]
	for i := range b.entries {
		e, z := &b.entries[i], &scalars[i]
		var buf [32]byte
		copy(buf[:16], random[16*i:])
		if _, err := z.SetCanonicalBytes(buf[:]); err != nil {
			return false // cannot happen: z < 2^128 < L
		}
		sumK := &scalars[n+e.key]
		sumK.MultiplyAdd(z, &e.k, sumK)
		sumS.MultiplyAdd(z, &e.s, sumS)
		points[i] = &e.r
	}
	for j := range b.keys {
		points[n+j] = &b.keys[j]
	}
	sumS.Negate(sumS)
	points[n+m] = edwards25519.NewGeneratorPoint()
	for i := range scalars {
		sPtrs[i] = &scalars[i]
	}
	var check edwards25519.Point
	return smallOrder(check.VarTimeMultiScalarMult(sPtrs, points))
}

// Package sigcheck verifies ed25519 signatures one at a time or many at
// once, under one rule, so that a signature's verdict does not depend on
// which of the two checked it.
//
// The rule is crypto/ed25519's, with the cofactored equation:
//
//   - the public key is any 32-byte encoding of a curve point that
//     crypto/ed25519 decodes;
//   - R, the signature's first half, is the canonical encoding of a curve
//     point (crypto/ed25519 requires this too, by comparing bytes);
//   - S, the second half, is a canonical scalar, less than the group order;
//   - [8]([S]B - R - [k]A) is the identity, k being SHA-512(R || A || M)
//     reduced modulo the group order.
//
// crypto/ed25519 checks [S]B - [k]A = R without the factor 8. The two agree
// on every signature crypto/ed25519 makes and on every forgery attempt by
// someone without the private key; they differ only on signatures whose R
// or key the key's holder built with a small-order component on purpose,
// which this rule accepts. Batch verification needs the factor: without
// it, a random linear combination of such signatures can cancel their
// small-order parts, and the verdict would depend on chance (see "Taming
// the many EdDSAs", Chalkias, Garillot and Nikolaenko, 2020). ZIP 215 made
// the same choice for the same reason.
package sigcheck

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"

	"filippo.io/edwards25519"
)

// Verify reports whether sig is a valid signature of msg by pub.
func Verify(pub, msg, sig []byte) bool {
	var e entry
	if !e.parse(pub, msg, sig, nil) {
		return false
	}
	// [S]B - [k]A - R, times the cofactor, must be the identity.
	var minusA, p edwards25519.Point
	minusA.Negate(&e.a)
	p.VarTimeDoubleScalarBaseMult(&e.k, &minusA, &e.s)
	p.Subtract(&p, &e.r)
	p.MultByCofactor(&p)
	return p.Equal(edwards25519.NewIdentityPoint()) == 1
}

// entry is one signature, decoded.
type entry struct {
	a, r edwards25519.Point
	s, k edwards25519.Scalar
	pub  string // the key's bytes, to combine the terms of one key
}

// parse decodes the key and the signature and computes k, reporting
// whether they are well formed under the rule of the package. When known
// is the key pub decodes to, it is used rather than decoded again.
func (e *entry) parse(pub, msg, sig []byte, known *edwards25519.Point) bool {
	if len(pub) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
		return false
	}
	if !canonicalPoint(sig[:32]) {
		return false
	}
	if _, err := e.r.SetBytes(sig[:32]); err != nil {
		return false
	}
	if _, err := e.s.SetCanonicalBytes(sig[32:]); err != nil {
		return false
	}
	if known != nil {
		e.a.Set(known)
	} else if _, err := e.a.SetBytes(pub); err != nil {
		return false
	}
	h := sha512.New()
	h.Write(sig[:32])
	h.Write(pub)
	h.Write(msg)
	var digest [sha512.Size]byte
	if _, err := e.k.SetUniformBytes(h.Sum(digest[:0])); err != nil {
		return false // cannot happen: the digest has the 64 bytes it needs
	}
	e.pub = string(pub)
	return true
}

// canonicalPoint reports whether b, 32 bytes, is the canonical encoding of
// a y coordinate and sign: y below p = 2^255 - 19, and the sign bit clear
// when x is zero (y = 1 or y = p - 1). It does not check that a point with
// that y exists; decoding does.
func canonicalPoint(b []byte) bool {
	// y >= p only when bytes 1 to 30 are all 0xff, the top byte (less
	// the sign bit) is 0x7f and the lowest is at least 0xed.
	high := true
	for _, x := range b[1:31] {
		if x != 0xff {
			high = false
			break
		}
	}
	if high && b[31]&0x7f == 0x7f && b[0] >= 0xed {
		return false
	}
	if b[31]&0x80 == 0 {
		return true
	}
	// The sign bit is set: refuse it on y = 1 and y = p - 1, whose x is 0.
	var y [32]byte
	copy(y[:], b)
	y[31] &= 0x7f
	return y != yOne && y != yMinusOne
}

var (
	yOne      = [32]byte{1}
	yMinusOne = [32]byte{0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}
)

// Batch collects signatures and verifies them together, at a fraction of
// the cost of verifying each: one multi-scalar multiplication checks a
// random linear combination of their equations.
type Batch struct {
	entries []entry
	bad     bool // an entry did not even parse
}

// key returns the point a previous entry decoded pub to, or nil: a batch
// usually holds one runner's signatures, and decoding a key costs about
// as much as the rest of an entry's preparation.
func (b *Batch) key(pub []byte) *edwards25519.Point {
	for i := len(b.entries) - 1; i >= max(0, len(b.entries)-4); i-- {
		if b.entries[i].pub == string(pub) {
			return &b.entries[i].a
		}
	}
	return nil
}

// Add adds pub's signature sig of msg to the batch. The batch keeps no
// reference to the slices.
func (b *Batch) Add(pub, msg, sig []byte) {
	var e entry
	if !e.parse(pub, msg, sig, b.key(pub)) {
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
	n := len(b.entries)
	if n == 0 {
		return true
	}
	// The z_i are random 128-bit scalars. Σ z_i ([S_i]B - R_i - [k_i]A_i)
	// is zero for valid signatures, and is computed as one multi-scalar
	// multiplication with the sign flipped:
	// Σ [z_i]R_i + Σ over keys [Σ z_i k_i]A - [Σ z_i S_i]B, times 8.
	random := make([]byte, 16*n)
	rand.Read(random)
	zs := make([]edwards25519.Scalar, n)
	scalars := make([]*edwards25519.Scalar, 0, n+2)
	points := make([]*edwards25519.Point, 0, n+2)
	var sumS edwards25519.Scalar
	var buf [32]byte
	for i := range b.entries {
		e, z := &b.entries[i], &zs[i]
		copy(buf[:16], random[16*i:])
		if _, err := z.SetCanonicalBytes(buf[:]); err != nil {
			return false // cannot happen: z < 2^128 < the group order
		}
		sumS.MultiplyAdd(z, &e.s, &sumS)
		scalars = append(scalars, z)
		points = append(points, &e.r)
	}
	// One term per distinct key, its coefficient summed over its entries.
	keyIndex := map[string]int{}
	for i := range b.entries {
		e := &b.entries[i]
		j, ok := keyIndex[e.pub]
		if !ok {
			j = len(scalars)
			keyIndex[e.pub] = j
			scalars = append(scalars, edwards25519.NewScalar())
			points = append(points, &e.a)
		}
		scalars[j].MultiplyAdd(&zs[i], &e.k, scalars[j])
	}
	var minusSumS edwards25519.Scalar
	minusSumS.Negate(&sumS)
	scalars = append(scalars, &minusSumS)
	points = append(points, edwards25519.NewGeneratorPoint())

	var check edwards25519.Point
	check.VarTimeMultiScalarMult(scalars, points)
	check.MultByCofactor(&check)
	return check.Equal(edwards25519.NewIdentityPoint()) == 1
}

package attest_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"testing"

	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent/attest"
)

// BenchmarkBuildSign measures one attestation of a verified receipt that
// wrote one file: reading its evidence and gate results, hashing the
// artifact's content and the final workspace's root, encoding and signing
// the envelope (the receipt's verification, which hg attest makes first,
// is not included).
func BenchmarkBuildSign(b *testing.B) {
	ctx := context.Background()
	st := memstore.New()
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, 32))
	v := runFixture(b, st, key, "writer", map[string]any{"text": "bench"})
	if !v.OK() {
		b.Fatalf("the fixture's receipt does not verify: %+v", v.FirstFailure())
	}
	signer := attest.NewSigner(key)
	target := attest.Target{Verification: v, Trusted: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}}
	b.ReportAllocs()
	for b.Loop() {
		stmt, err := attest.Build(ctx, st, target)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := attest.Sign(ctx, stmt, signer); err != nil {
			b.Fatal(err)
		}
	}
}

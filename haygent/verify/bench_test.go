package verify_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"path/filepath"
	"testing"

	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/verify"
	"github.com/ipfs/go-cid"
)

// BenchmarkVerifyReceipt verifies one stored receipt of the echo Haygent
// (4 transitions) again and again, in memory: the verifier's cost per
// receipt, signature included, without a run around it.
func BenchmarkVerifyReceipt(b *testing.B) {
	st := memstore.New()
	pkg, err := haygent.Load(filepath.Join("..", "..", "fixtures", "haygents", "echo"))
	if err != nil {
		b.Fatal(err)
	}
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32))
	res, err := haygent.Run(context.Background(), pkg, map[string]any{"value": 42}, haygent.Options{Store: st, Key: key})
	if err != nil {
		b.Fatal(err)
	}
	trusted := []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
	known := map[cid.Cid]bool{res.Receipt.Package.Cid: true}
	cache := verify.NewCache()
	verifyOnce := func() {
		// A verifier on another machine has checked no signature before;
		// the package's gates, compiled for the first receipt, are kept.
		cache.ForgetSignatures()
		v, err := verify.VerifyReceiptKnown(context.Background(), st, res.ReceiptCID, trusted, known, cache)
		if err != nil || !v.OK() {
			b.Fatalf("verify: %v %+v", err, v.FirstFailure())
		}
	}
	// Each op is many verifications after a warm-up, so that make bench's
	// single op measures the steady state.
	verifyOnce()
	b.ResetTimer()
	for b.Loop() {
		for range 200 { // verifications per op
			verifyOnce()
		}
	}
	b.ReportMetric(float64(b.N*200*int(res.Receipt.Transitions))/b.Elapsed().Seconds(), "transitions/s")
}

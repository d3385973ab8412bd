package haygent_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/boltstore"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/verify"
	"github.com/ipfs/go-cid"
)

// benchStore returns a fresh on-disk store, closed at the end.
func benchStore(b *testing.B) cas.Store {
	dir := filepath.Join(b.TempDir(), "store")
	if err := boltstore.Init(dir); err != nil {
		b.Fatal(err)
	}
	st, err := boltstore.Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

func benchRun(b *testing.B, pkgDir string, st cas.Store) time.Duration {
	pkg, err := haygent.Load(pkgDir)
	if err != nil {
		b.Fatal(err)
	}
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32))
	ws := b.TempDir()
	run := func() time.Duration {
		start := time.Now()
		res, err := haygent.Run(context.Background(), pkg, map[string]any{}, haygent.Options{Store: st, Key: key, Workspace: ws})
		if err != nil {
			b.Fatal(err)
		}
		if res.Receipt.Status != ledger.StatusPass {
			b.Fatalf("status %s: %+v", res.Receipt.Status, res.Receipt.Halt)
		}
		return time.Since(start)
	}
	run() // warm-up, uncounted
	var total time.Duration
	for range b.N {
		total += run()
	}
	return total / time.Duration(b.N)
}

// BenchmarkBuiltinOnly invokes a Haygent made only of builtin steps, the
// receipt signed and stored, on disk (bbolt, synced) and in memory.
// Target: under 1 ms.
func BenchmarkBuiltinOnly(b *testing.B) {
	b.Run("bbolt", func(b *testing.B) {
		d := benchRun(b, "testdata/bench/builtin", benchStore(b))
		b.ReportMetric(float64(d.Microseconds())/1000, "ms/invocation")
	})
	b.Run("memory", func(b *testing.B) {
		d := benchRun(b, "testdata/bench/builtin", memstore.New())
		b.ReportMetric(float64(d.Microseconds())/1000, "ms/invocation")
	})
}

// BenchmarkExecTrue compares a Haygent whose one exec step runs `true`
// with running `true` directly, in one sitting after a warm-up of each.
// Target: overhead under 15 ms.
func BenchmarkExecTrue(b *testing.B) {
	st := benchStore(b)
	direct := func() time.Duration {
		start := time.Now()
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	direct()
	var d time.Duration
	for range b.N {
		d += direct()
	}
	d /= time.Duration(b.N)
	h := benchRun(b, "testdata/bench/exectrue", st)
	b.ReportMetric(float64(d.Microseconds())/1000, "direct-ms")
	b.ReportMetric(float64(h.Microseconds())/1000, "haygent-ms")
	b.ReportMetric(float64((h-d).Microseconds())/1000, "overhead-ms")
}

// microOps is how many invocations or verifications one op of the
// per-receipt benchmarks makes.
const microOps = 200

// BenchmarkRunVerify runs the echo Haygent and verifies its receipt, as a
// scheduler does for each node of a chain: the work on a chain's critical
// path, without the scheduler around it. Each input differs, so every
// receipt is new.
func BenchmarkRunVerify(b *testing.B) {
	st := memstore.New()
	ctx := context.Background()
	dir := filepath.Join(fixtures, "haygents", "echo")
	pkg, err := haygent.Load(dir)
	if err != nil {
		b.Fatal(err)
	}
	// The package tree is stored once, as a scheduler does for a run.
	pkgCID, err := cas.PutTree(ctx, st, dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	known := map[cid.Cid]bool{pkgCID: true}
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32))
	trusted := []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
	// One cache, as a scheduler holds it: the runtime's signatures go in,
	// and acceptance finds them there.
	cache := verify.NewCache()
	i := 0
	runVerify := func() {
		i++
		res, err := haygent.Run(ctx, pkg, map[string]any{"value": i}, haygent.Options{Store: st, Key: key, PackageCID: pkgCID, Signatures: cache.Signatures()})
		if err != nil {
			b.Fatal(err)
		}
		v, err := verify.VerifyReceiptKnown(ctx, st, res.ReceiptCID, trusted, known, cache)
		if err != nil || !v.OK() {
			b.Fatalf("verify: %v %+v", err, v.FirstFailure())
		}
	}
	runVerify() // warm-up
	b.ResetTimer()
	for b.Loop() {
		for range microOps {
			runVerify()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*microOps), "µs/node")
}

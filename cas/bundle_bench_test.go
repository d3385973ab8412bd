package cas_test

// Benchmarks of bundles with no disk write in the way: a 64 MiB file
// exported from a bbolt store (read from the page cache and verified, as
// a memory store would not: it trusts the blocks it was given) to
// io.Discard, and imported into a memory store, each next to Go's
// crypto/sha256 over the same bytes, measured in the same sitting after a
// warm-up. (The 1 GiB figures of the hg binary, on disk, are
// BenchmarkBundle in cmd/hg.)

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/boltstore"
	"github.com/haygent/hg/cas/memstore"
	"github.com/ipfs/go-cid"
)

// benchSHA256 returns how long one sha256 of data takes, the best of
// three after a warm-up.
func benchSHA256(data []byte) time.Duration {
	sha256.Sum256(data)
	best := time.Duration(1 << 62)
	for range 3 {
		start := time.Now()
		sha256.Sum256(data)
		best = min(best, time.Since(start))
	}
	return best
}

// benchAgainstSHA256 times op, which handles data's bytes, b.N times
// after a warm-up, and reports its throughput over sha256's on data.
func benchAgainstSHA256(b *testing.B, data []byte, op func()) {
	sha := benchSHA256(data)
	op() // warm-up
	b.SetBytes(benchFileBytes)
	b.ResetTimer()
	for range b.N {
		op()
	}
	b.StopTimer()
	reportSHA256Ratio(b, sha)
}

// reportSHA256Ratio reports the throughput of b's operation over that
// of sha256 on the same bytes.
func reportSHA256Ratio(b *testing.B, sha time.Duration) {
	per := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(benchFileBytes)/1e6/sha.Seconds(), "sha256-MB/s")
	b.ReportMetric(sha.Seconds()/per.Seconds(), "sha256-ratio")
}

// benchBundleSource puts a 64 MiB file into a new bbolt store.
func benchBundleSource(b *testing.B) (cas.Store, cid.Cid, []byte) {
	data := benchData(benchFileBytes, 3)
	dir := filepath.Join(b.TempDir(), "store")
	if err := boltstore.Init(dir); err != nil {
		b.Fatal(err)
	}
	st, err := boltstore.Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	root, _, err := cas.PutFile(context.Background(), st, bytes.NewReader(data), nil)
	if err != nil {
		b.Fatal(err)
	}
	return st, root, data
}

// BenchmarkExportCAR writes the bundle of a 64 MiB file from a bbolt
// store to io.Discard, verifying every block.
func BenchmarkExportCAR(b *testing.B) {
	st, root, data := benchBundleSource(b)
	defer st.Close()
	ctx := context.Background()
	export := func() {
		if _, err := cas.ExportCAR(ctx, st, []cid.Cid{root}, io.Discard, nil); err != nil {
			b.Fatal(err)
		}
	}
	benchAgainstSHA256(b, data, export)
}

// BenchmarkImportCAR reads the bundle of a 64 MiB file into a fresh
// memory store, checking every block.
func BenchmarkImportCAR(b *testing.B) {
	src, root, data := benchBundleSource(b)
	var car bytes.Buffer
	if _, err := cas.ExportCAR(context.Background(), src, []cid.Cid{root}, &car, nil); err != nil {
		b.Fatal(err)
	}
	src.Close()
	ctx := context.Background()
	imp := func() {
		st := memstore.New()
		defer st.Close()
		if _, err := cas.ImportCAR(ctx, st, bytes.NewReader(car.Bytes()), nil); err != nil {
			b.Fatal(err)
		}
	}
	benchAgainstSHA256(b, data, imp)
}

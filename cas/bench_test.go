package cas_test

// Benchmarks of the library's own speed, for benchstat: a 64 MiB file
// through PutFile and ReadFile on the memory store, with no disk in the
// way. (1 KiB blocks through the bbolt store against raw bbolt are
// BenchmarkPutSmall and BenchmarkRawBoltSmall in cas/boltstore; the 1 GiB
// figures of the hg binary are BenchmarkHG in cmd/hg.)
//
// `make bench` runs each once (-benchtime 1x), so each runs its operation
// once untimed before it measures.

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
)

const benchFileBytes = 64 << 20

// benchData returns n deterministic pseudo-random bytes.
func benchData(n int, seed byte) []byte {
	r := rand.NewChaCha8([32]byte{'h', 'g', seed})
	b := make([]byte, n)
	_, _ = r.Read(b)
	return b
}

// BenchmarkPutFile stores a 64 MiB file with PutFile into a fresh memory
// store: chunking, hashing and indexing.
func BenchmarkPutFile(b *testing.B) {
	data := benchData(benchFileBytes, 1)
	ctx := context.Background()
	put := func() {
		st := memstore.New()
		defer st.Close()
		_, size, err := cas.PutFile(ctx, st, bytes.NewReader(data), nil)
		if err != nil {
			b.Fatal(err)
		}
		if size != benchFileBytes {
			b.Fatalf("PutFile stored %d bytes, want %d", size, benchFileBytes)
		}
	}
	put() // warm-up
	b.SetBytes(benchFileBytes)
	b.ResetTimer()
	for range b.N {
		put()
	}
}

// BenchmarkReadFile reads a 64 MiB file back with ReadFile from a memory
// store, verifying every block.
func BenchmarkReadFile(b *testing.B) {
	data := benchData(benchFileBytes, 2)
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()
	root, _, err := cas.PutFile(ctx, st, bytes.NewReader(data), nil)
	if err != nil {
		b.Fatal(err)
	}
	read := func() {
		n, err := cas.ReadFile(ctx, st, root, io.Discard, nil)
		if err != nil {
			b.Fatal(err)
		}
		if n != benchFileBytes {
			b.Fatalf("ReadFile gave %d bytes, want %d", n, benchFileBytes)
		}
	}
	read() // warm-up
	b.SetBytes(benchFileBytes)
	b.ResetTimer()
	for range b.N {
		read()
	}
}

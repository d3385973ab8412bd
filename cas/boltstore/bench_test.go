package boltstore

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	bolt "go.etcd.io/bbolt"
)

const (
	benchBatch     = 1000    // blocks per Put
	benchBlockSize = 1 << 10 // bytes per block
)

// benchBlocks returns n batches of distinct random 1 KiB blocks.
func benchBlocks(b *testing.B, n int) [][]cas.Block {
	b.Helper()
	rng := rand.NewChaCha8([32]byte{byte(n)})
	batches := make([][]cas.Block, n)
	for i := range batches {
		batches[i] = make([]cas.Block, benchBatch)
		for j := range batches[i] {
			d := make([]byte, benchBlockSize)
			rng.Read(d)
			batches[i][j] = cas.NewBlock(cas.Raw, d)
		}
	}
	return batches
}

func reportBlocks(b *testing.B) {
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "blocks/s")
}

// BenchmarkPutSmall puts batches of 1000 new 1 KiB blocks through
// Store.Put; one op is one batch. Compare with BenchmarkRawBoltSmall.
func BenchmarkPutSmall(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "store")
	if err := Init(dir); err != nil {
		b.Fatal(err)
	}
	s, err := Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	batches := benchBlocks(b, b.N)
	ctx := context.Background()
	b.SetBytes(benchBatch * benchBlockSize)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Put(ctx, batches[i]...); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportBlocks(b)
}

// BenchmarkRawBoltSmall puts the same kind of batches as BenchmarkPutSmall
// straight into a bbolt bucket, with the same options and fsync, keys and
// values computed in advance and in the order given: the floor for Put.
func BenchmarkRawBoltSmall(b *testing.B) {
	opts := boltOptions(false, time.Second)
	opts.OpenFile = nil // create the file
	db, err := bolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, opts)
	if err == nil {
		err = db.Update(func(tx *bolt.Tx) error {
			_, err := tx.CreateBucket(bucketBlocks)
			return err
		})
	}
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	batches := benchBlocks(b, b.N)
	keys := make([][][]byte, b.N)
	for i, batch := range batches {
		keys[i] = make([][]byte, len(batch))
		for j, blk := range batch {
			keys[i][j] = blk.CID().Bytes()
		}
	}
	b.SetBytes(benchBatch * benchBlockSize)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		err := db.Update(func(tx *bolt.Tx) error {
			bk := tx.Bucket(bucketBlocks)
			for j, blk := range batches[i] {
				if err := bk.Put(keys[i][j], blk.Data()); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportBlocks(b)
}

// BenchmarkSmallBlocksRatio measures, in one sitting, 1 KiB blocks put
// through the store (hashing included: each block is made with
// cas.NewBlock inside the timed loop) against the same keys and values put
// straight into bbolt, after one uncounted warm-up round of each, and
// reports their throughput ratio (target: at least 0.8).
func BenchmarkSmallBlocksRatio(b *testing.B) {
	const rounds = 20 // batches of 1000 per measured round
	opts := boltOptions(false, time.Second)
	opts.OpenFile = nil
	db, err := bolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, opts)
	if err == nil {
		err = db.Update(func(tx *bolt.Tx) error {
			_, err := tx.CreateBucket(bucketBlocks)
			return err
		})
	}
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	dir := filepath.Join(b.TempDir(), "store")
	if err := Init(dir); err != nil {
		b.Fatal(err)
	}
	s, err := Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()

	raw := func(batches [][]cas.Block) time.Duration {
		keys := make([][][]byte, len(batches))
		for i, batch := range batches {
			for _, blk := range batch {
				keys[i] = append(keys[i], blk.CID().Bytes())
			}
		}
		start := time.Now()
		for i, batch := range batches {
			err := db.Update(func(tx *bolt.Tx) error {
				bk := tx.Bucket(bucketBlocks)
				for j, blk := range batch {
					if err := bk.Put(keys[i][j], blk.Data()); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	store := func(batches [][]cas.Block) time.Duration {
		start := time.Now()
		blocks := make([]cas.Block, benchBatch)
		for _, batch := range batches {
			for j, blk := range batch {
				blocks[j] = cas.NewBlock(cas.Raw, blk.Data())
			}
			if err := s.Put(ctx, blocks...); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	var tRaw, tStore time.Duration
	for range b.N {
		raw(benchBlocks(b, 5)) // warm-up, uncounted
		store(benchBlocks(b, 5))
		data := benchBlocks(b, rounds)
		tRaw += raw(data)
		tStore += store(data)
	}
	n := float64(b.N * rounds * benchBatch)
	b.ReportMetric(n/tRaw.Seconds(), "raw-blocks/s")
	b.ReportMetric(n/tStore.Seconds(), "hg-blocks/s")
	b.ReportMetric(tRaw.Seconds()/tStore.Seconds(), "hg/raw-ratio")
}

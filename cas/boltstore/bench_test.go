package boltstore

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
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
	s, _ := newStore(b)
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
	s, _ := newStore(b)
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

// plainPuts hides a store's PutPacked, so that cas.PutPacked stores
// through Puts, as it does for a store that is no cas.BulkPutter.
type plainPuts struct{ cas.BlockWriter }

// benchCommit returns the blocks of a scheduler's commit of nodes nodes:
// a Packed per node of perNode blocks of 64 to 1,023 bytes (receipts,
// transitions, packets), new each time.
func benchCommit(rng *rand.ChaCha8, nodes, perNode int) ([]cas.Packed, int) {
	packs := make([]cas.Packed, nodes)
	blocks := make([]cas.Block, perNode)
	var sizes [2]byte
	for i := range packs {
		for j := range blocks {
			rng.Read(sizes[:])
			d := make([]byte, 64+int(binary.LittleEndian.Uint16(sizes[:]))%960)
			rng.Read(d)
			blocks[j] = cas.NewBlock(cas.Raw, d)
		}
		packs[i] = cas.Pack(blocks...)
	}
	return packs, nodes * perNode
}

// BenchmarkPutPackedRatio measures, in one sitting, what a scheduler's
// commit costs the store (as in scheduler's BenchmarkScheduler on bbolt):
// run after run of commits of 2,000 nodes' blocks, a dozen small blocks a
// node, each into a store that grows with them. The same commits go into
// two stores: through PutPacked (key order, bulkChunk blocks a
// transaction), and through cas.PutPacked for a store that is no
// BulkPutter (a cas.Writer's Puts, in the order packed), which goes
// first alternating. It reports both rates and plain/bulk, the time of
// the plain puts over that of the bulk ones. HG_BENCH_COMMITS sets the
// commits of a run (default 10).
func BenchmarkPutPackedRatio(b *testing.B) {
	const nodes, perNode = 2000, 12
	commits := 10
	if s := os.Getenv("HG_BENCH_COMMITS"); s != "" {
		commits, _ = strconv.Atoi(s)
	}
	ctx := context.Background()
	var tBulk, tPlain time.Duration
	total := 0
	for i := range b.N {
		bulk, _ := newStore(b)
		plain, _ := newStore(b)
		rng := rand.NewChaCha8([32]byte{byte(i)})
		for c := range commits {
			packs, n := benchCommit(rng, nodes, perNode)
			total += n
			timed := func(st cas.BlockWriter) time.Duration {
				start := time.Now()
				if err := cas.PutPacked(ctx, st, packs...); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}
			if c%2 == 0 {
				tBulk += timed(bulk)
				tPlain += timed(plainPuts{plain})
			} else {
				tPlain += timed(plainPuts{plain})
				tBulk += timed(bulk)
			}
		}
		bulk.Close()
		plain.Close()
	}
	b.ReportMetric(float64(total)/tBulk.Seconds(), "bulk-blocks/s")
	b.ReportMetric(float64(total)/tPlain.Seconds(), "plain-blocks/s")
	b.ReportMetric(tPlain.Seconds()/tBulk.Seconds(), "plain/bulk")
}

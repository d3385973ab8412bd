package boltstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
	bolt "go.etcd.io/bbolt"
)

const (
	crashBatch      = 48   // blocks per Put in the crash child
	crashMaxBatches = 2000 // the child stops there if nobody kills it
)

// crashBlock returns block i of batch n of the given run: the same bytes
// in the child that writes it and in the parent that checks it. Sizes run
// from a few bytes to 1 MiB, so that Puts touch leaf and overflow pages.
func crashBlock(run, n, i int) cas.Block {
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[0:], uint64(run))
	binary.LittleEndian.PutUint64(seed[8:], uint64(n))
	binary.LittleEndian.PutUint64(seed[16:], uint64(i))
	size := (i*i*4099 + n*31) % (200 << 10)
	if i%16 == 0 {
		size = 1 << 20
	}
	d := make([]byte, size)
	rand.NewChaCha8(seed).Read(d)
	return cas.NewBlock(cas.Raw, d)
}

// crashChild writes batch after batch to the store in dir, printing
// "batch N" once Put N has returned, until it is killed.
func crashChild(dir string, run int) error {
	s, err := Open(dir, &Options{Command: "hg crash child", Timeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer s.Close()
	ctx := context.Background()
	blocks := make([]cas.Block, crashBatch)
	for n := range crashMaxBatches {
		for i := range blocks {
			blocks[i] = crashBlock(run, n, i)
		}
		if err := s.Put(ctx, blocks...); err != nil {
			return err
		}
		fmt.Printf("batch %d\n", n)
	}
	return nil
}

// TestCrash kills a process in the middle of its Puts, several times, and
// checks that the database opens, passes bbolt's consistency check, holds
// every batch whose Put returned, and that every block in it verifies.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	if err := Init(dir); err != nil {
		t.Fatal(err)
	}
	const runs = 6
	committed := make([]int, runs) // batches the child saw committed, per run
	for run := range runs {
		p := startChild(t, "crash", dir, envRun+"="+strconv.Itoa(run))
		last := -1
		parse := func(line string) {
			n, err := strconv.Atoi(strings.TrimPrefix(line, "batch "))
			if err != nil {
				t.Fatalf("child said %q", line)
			}
			last = n
		}
		// Let it commit a few batches, then kill it at some point in a
		// later one.
		for range 2 + run {
			parse(p.next(t))
		}
		time.Sleep(time.Duration(rand.IntN(80)) * time.Millisecond)
		for _, line := range p.kill() {
			parse(line)
		}
		committed[run] = last + 1
		t.Logf("run %d: killed after %d committed batches", run, last+1)
	}

	s, err := Open(dir, &Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("Open after the crashes: %v", err)
	}
	defer s.Close()
	if err := s.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("bbolt check: %v", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	total := 0
	err = s.AllKeys(ctx, func(c cid.Cid, size int) error {
		total++
		return s.View(ctx, c, func(d []byte) error {
			if len(d) != size {
				t.Errorf("%s: AllKeys says %d bytes, View gives %d", c, size, len(d))
			}
			return nil
		})
	})
	if err != nil {
		t.Fatalf("verifying every block: %v", err)
	}
	want := 0
	for run, n := range committed {
		for b := range n {
			for i := range crashBatch {
				c := crashBlock(run, b, i).CID()
				ok, err := s.Has(ctx, c)
				if err != nil || !ok {
					t.Fatalf("run %d batch %d block %d, whose Put returned, is missing (%v)", run, b, i, err)
				}
			}
		}
		want += n * crashBatch
	}
	// A child may have been killed after a commit but before it said so:
	// at most one more batch per run.
	if total < want || total > want+runs*crashBatch {
		t.Errorf("%d blocks after the crashes, want %d committed (+ at most one batch per run)", total, want)
	}
	t.Logf("%d blocks verified", total)
}

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
	blocks := make([]cas.Block, crashBatch)
	return crashSteps(dir, "batch", func(s *Store, n int) error {
		for i := range blocks {
			blocks[i] = crashBlock(run, n, i)
		}
		return s.Put(context.Background(), blocks...)
	})
}

// crashSteps opens the store in dir for writing and takes step after step
// in it, printing "WORD N" once step N has returned, until it is killed
// (or has taken crashMaxBatches of them).
func crashSteps(dir, word string, step func(s *Store, n int) error) error {
	s, err := Open(dir, &Options{Command: "hg crash child: " + word, Timeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer s.Close()
	for n := range crashMaxBatches {
		if err := step(s, n); err != nil {
			return err
		}
		fmt.Printf("%s %d\n", word, n)
	}
	return nil
}

// TestCrash kills a process in the middle of its Puts, several times, and
// checks that the database opens, passes bbolt's consistency check, holds
// every batch whose Put returned, and that every block in it verifies.
func TestCrash(t *testing.T) {
	// Let each child commit a few batches, then kill it at some point in
	// a later one.
	const runs = 6
	s, committed := killRuns(t, "crash", "batch", runs, func(run int) int { return 2 + run }, 80*time.Millisecond)
	defer s.Close()
	ctx := context.Background()
	total := 0
	err := s.AllKeys(ctx, func(c cid.Cid, size int) error {
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

// killRuns makes a store and runs a child in mode on it, runs times one
// after the other. Each says "WORD N" once its step N is done; once it
// has said so first(run) times, it is killed after a random wait of up to
// wait. killRuns returns the store, opened after the crashes (openAfterCrash),
// and how many steps each child said it had done. It skips the test in
// short mode.
func killRuns(t *testing.T, mode, word string, runs int, first func(run int) int, wait time.Duration) (*Store, []int) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	if err := Init(dir); err != nil {
		t.Fatal(err)
	}
	done := make([]int, runs)
	for run := range runs {
		p := startChild(t, mode, dir, envRun+"="+strconv.Itoa(run))
		last := -1
		parse := func(line string) {
			n, err := strconv.Atoi(strings.TrimPrefix(line, word+" "))
			if err != nil {
				t.Fatalf("child said %q", line)
			}
			last = n
		}
		for range first(run) {
			parse(p.next(t))
		}
		time.Sleep(time.Duration(rand.Int64N(int64(wait))))
		for _, line := range p.kill() {
			parse(line)
		}
		done[run] = last + 1
		t.Logf("run %d: killed after it said %q %d times", run, word, last+1)
	}
	return openAfterCrash(t, dir), done
}

// openAfterCrash opens the store in dir for writing, which recovers it,
// and fails the test unless bbolt's consistency check passes.
func openAfterCrash(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, &Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("Open after the crashes: %v", err)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("bbolt check: %v", err)
		}
		return nil
	}); err != nil {
		s.Close()
		t.Fatal(err)
	}
	return s
}

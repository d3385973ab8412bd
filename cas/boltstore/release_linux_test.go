package boltstore

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/haygent/hg/cas"
	bolt "go.etcd.io/bbolt"
)

// TestReleaseKeepsData views large blocks again and again, from several
// goroutines at once, after View has dropped their pages: the bytes must
// come back intact from the page cache.
func TestReleaseKeepsData(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	defer s.Close()
	var blocks []cas.Block
	for i, n := range []int{releaseMin - 1, releaseMin, releaseMin + 1, 1 << 20, 1<<20 + 12345, cas.MaxBlockSize} {
		blocks = append(blocks, block(fmt.Sprint("big-", i), n))
	}
	if err := s.Put(ctx, blocks...); err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, b cas.Block) {
		err := s.View(ctx, b.CID(), func(d []byte) error {
			if !bytes.Equal(d, b.Data()) {
				return fmt.Errorf("%d bytes, wrong contents", len(d))
			}
			return nil
		})
		if err != nil {
			t.Errorf("View(%d-byte block): %v", len(b.Data()), err)
		}
		got, err := s.Get(ctx, b.CID())
		if err != nil || !bytes.Equal(got, b.Data()) {
			t.Errorf("Get(%d-byte block) after View: %v", len(b.Data()), err)
		}
	}
	for range 2 {
		for _, b := range blocks {
			check(t, b)
		}
	}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := range 10 {
				check(t, blocks[(w+i)%len(blocks)])
			}
		})
	}
	wg.Wait()
}

// rssFile returns the process's resident file-backed memory.
func rssFile(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "RssFile:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Skipf("RssFile: %v", err)
			}
			return kb << 10
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}

// TestViewReleasesPages reads 48 MiB through View and checks that the
// resident set does not keep it; then reads it straight through bbolt, to
// show that the measure would have seen it.
func TestViewReleasesPages(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	const n, size = 48, 1 << 20
	var blocks []cas.Block
	for i := range n {
		blocks = append(blocks, block(fmt.Sprint("rss-", i), size))
	}
	if err := s.Put(ctx, blocks...); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err := Open(dir, &Options{ReadOnly: true}) // a fresh mapping
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	before := rssFile(t)
	for _, b := range blocks {
		if err := s.View(ctx, b.CID(), func(d []byte) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	viewGrowth := rssFile(t) - before

	before = rssFile(t)
	var sum byte
	s.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketBlocks)
		for _, b := range blocks {
			for _, x := range bk.Get(b.CID().Bytes()) {
				sum += x
			}
		}
		return nil
	})
	rawGrowth := rssFile(t) - before
	t.Logf("RssFile grew by %d KiB reading %d MiB through View, by %d KiB reading it straight (sum %d)", viewGrowth>>10, n*size>>20, rawGrowth>>10, sum)
	if rawGrowth < n*size/2 {
		t.Skipf("reading %d MiB without releasing grew RssFile by only %d KiB: cannot measure here", n*size>>20, rawGrowth>>10)
	}
	if viewGrowth > n*size/4 {
		t.Errorf("reading %d MiB through View grew RssFile by %d KiB", n*size>>20, viewGrowth>>10)
	}
}

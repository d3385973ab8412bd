package cas_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/ipfs/go-cid"
)

// A Writer refuses a block over the limit when it is added, naming the
// limit, and stores nothing of it: a store holding such a block could not
// be moved, since no bundle section carries it.
func TestWriterRefusesBlockOverLimit(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	w := cas.NewWriter(st)
	small := cas.NewBlock(cas.Raw, []byte("small"))
	big := cas.NewBlock(cas.Raw, make([]byte, cas.MaxBlockSize+1))
	if err := w.Add(ctx, small); err != nil {
		t.Fatal(err)
	}
	err := w.Add(ctx, big)
	if !errors.Is(err, cas.ErrTooLarge) || !strings.Contains(err.Error(), fmt.Sprintf("over the block limit of %d bytes", cas.MaxBlockSize)) {
		t.Fatalf("Add of %d bytes = %v; want an error naming the limit", len(big.Data()), err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatalf("Flush after the refusal: %v", err)
	}
	if ok, _ := st.Has(ctx, big.CID()); ok {
		t.Fatal("the block over the limit was stored")
	}
	if ok, _ := st.Has(ctx, small.CID()); !ok {
		t.Fatal("the block before it was lost")
	}
	// A block of exactly the limit is taken.
	at := cas.NewBlock(cas.Raw, make([]byte, cas.MaxBlockSize))
	if err := w.Add(ctx, at); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	n := 0
	st.AllKeys(ctx, func(_ cid.Cid, size int) error {
		if size > cas.MaxBlockSize {
			t.Errorf("a stored block of %d bytes", size)
		}
		n++
		return nil
	})
	if n != 2 {
		t.Fatalf("%d blocks stored, want 2", n)
	}
}

// A directory whose tree node would be over the limit is refused, naming
// the directory and the limit, and no root comes back: one node holds a
// whole directory (sharding it is future work).
func TestPutTreeRefusesDirectoryOverLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("makes 14,000 files")
	}
	dir := t.TempDir()
	sub := filepath.Join(dir, "crowded")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("n", 240)
	for i := range 14000 {
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("%s%06d", long, i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st := memstore.New()
	c, err := cas.PutTree(context.Background(), st, dir, nil)
	if !errors.Is(err, cas.ErrTooLarge) || !strings.Contains(err.Error(), "directory crowded: its 14000 entries") ||
		!strings.Contains(err.Error(), fmt.Sprintf("over the block limit of %d bytes", cas.MaxBlockSize)) {
		t.Fatalf("PutTree = %v, %v; want the crowded directory refused, naming the limit", c, err)
	}
}

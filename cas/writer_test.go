package cas_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
)

// A Writer whose caller reuses buffers after each flush (OnFlush set) must
// have the store copy them: the stored bytes stay as they were put.
func TestWriterCopiesWhenBuffersAreReused(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	w := cas.NewWriter(st)
	buf := []byte("the first block's bytes")
	b := cas.NewBlock(cas.Raw, buf)
	w.OnFlush = func([]cas.Block) { copy(buf, "reused!") }
	if err := w.Add(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(buf, []byte("reused!")) {
		t.Fatal("OnFlush was not called")
	}
	got, err := st.Get(ctx, b.CID())
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "the first block's bytes" {
		t.Fatalf("stored bytes changed with the reused buffer: %q", got)
	}
}

// Without OnFlush an in-memory store takes the blocks over; they are
// stored all the same, and a cancelled context still stops the flush.
func TestWriterHandsBlocksToAnAdopter(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	w := cas.NewWriter(st)
	w.MaxBlocks = 2 // the first two go in the background, the third at Flush
	var blocks []cas.Block
	for _, s := range []string{"a", "b", "c"} {
		b := cas.NewBlock(cas.Raw, []byte(s))
		blocks = append(blocks, b)
		if err := w.Add(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		if err := st.View(ctx, b.CID(), func(data []byte) error {
			if !bytes.Equal(data, b.Data()) {
				t.Errorf("%s holds %q", b.CID(), data)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	late := cas.NewBlock(cas.Raw, []byte("late"))
	if err := w.Add(cctx, late); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("flush with a cancelled context: %v", err)
	}
	if ok, _ := st.Has(ctx, late.CID()); ok {
		t.Fatal("a cancelled flush stored its block")
	}
}

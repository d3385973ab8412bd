package memstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/cas/storetest"
	"github.com/ipfs/go-cid"
)

func TestConformance(t *testing.T) {
	storetest.RunWithOptions(t, func(*testing.T) cas.Store { return memstore.New() }, storetest.Options{
		Corrupt: func(t *testing.T, s cas.Store, c cid.Cid, data []byte) {
			if !s.(*memstore.Store).Corrupt(c, data) {
				t.Fatalf("Corrupt(%s): block not stored", c)
			}
		},
	})
}

func TestBlocksSkipsCorrupted(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	a, b := cas.NewBlock(cas.Raw, []byte("a")), cas.NewBlock(cas.Raw, []byte("b"))
	if err := st.Put(ctx, a, b); err != nil {
		t.Fatal(err)
	}
	st.Corrupt(b.CID(), []byte("not b"))
	got, err := st.Blocks(ctx)
	if err != nil || len(got) != 1 || got[0].CID() != a.CID() || string(got[0].Data()) != "a" {
		t.Fatalf("Blocks = %v, %v; want only a", got, err)
	}
	if _, err := st.Get(ctx, b.CID()); !errors.Is(err, cas.ErrCorrupt) {
		t.Fatalf("Get of the corrupted block: %v", err)
	}
}

package scheduler

import (
	"context"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/storetest"
)

// A staging store is a whole cas.Store: the runtime uses it as one.
func TestStagingConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) cas.Store { return newStaging(nil) })
}

// blocks returns what was put, once each and in order, never the base,
// and nothing deleted.
func TestStagingBlocks(t *testing.T) {
	ctx := context.Background()
	base := cas.NewBlock(cas.Raw, []byte("base"))
	a, b, c := cas.NewBlock(cas.Raw, []byte("a")), cas.NewBlock(cas.Raw, []byte("b")), cas.NewBlock(cas.Raw, []byte("c"))
	s := newStaging(blockIndex([]cas.Block{base}))
	if err := s.Adopt(a, b, a); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, c, base); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, b.CID()); err != nil {
		t.Fatal(err)
	}
	if err := s.Adopt(b); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, c.CID()); err != nil {
		t.Fatal(err)
	}
	got, err := s.blocks()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range got {
		names = append(names, string(g.Data()))
	}
	// base was put too: a staging store returns what the node wrote,
	// even a block its base already holds.
	if want := []string{"a", "base", "b"}; len(names) != len(want) || names[0] != want[0] || names[1] != want[1] || names[2] != want[2] {
		t.Fatalf("blocks = %q, want %q", names, want)
	}
	if ok, err := s.Has(ctx, base.CID()); !ok || err != nil {
		t.Fatalf("Has(base) = %v, %v", ok, err)
	}
}

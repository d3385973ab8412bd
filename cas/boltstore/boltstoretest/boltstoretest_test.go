package boltstoretest_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/boltstore"
	"github.com/haygent/hg/cas/boltstore/boltstoretest"
	"github.com/ipfs/go-cid"
)

// block returns a raw block of n bytes made of seed.
func block(seed string, n int) cas.Block {
	return cas.NewBlock(cas.Raw, bytes.Repeat([]byte(seed), n/len(seed)+1)[:n])
}

// Corrupt damages a block kept inline in the database and one in a pack
// file alike: reads catch both, the block beside them reads back whole,
// the sizes stay.
func TestCorrupt(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), ".haygent")
	if err := boltstore.Init(dir); err != nil {
		t.Fatal(err)
	}
	s, err := boltstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, p, b := block("corrupt-a", 5000), block("corrupt-packed", 100<<10), block("corrupt-b", 10)
	if err := s.Put(ctx, a, p, b); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		b      cas.Block
		inline bool
	}{{a, true}, {p, false}} {
		if ext, err := s.Locate(ctx, x.b.CID()); err != nil || ext.Inline != x.inline {
			t.Fatalf("Locate(%s) = %+v, %v; want Inline %v", x.b.CID(), ext, err, x.inline)
		}
	}
	s.Close()
	for _, c := range []cas.Block{a, p} {
		if err := boltstoretest.Corrupt(dir, c.CID(), len(c.Data())-1); err != nil {
			t.Fatalf("Corrupt: %v", err)
		}
	}
	var nf *cas.NotFoundError
	if err := boltstoretest.Corrupt(dir, block("absent", 5).CID(), 0); !errors.As(err, &nf) {
		t.Errorf("Corrupt of a missing block = %v, want a *cas.NotFoundError", err)
	}
	for _, off := range []int{-1, 10, 1000} {
		if err := boltstoretest.Corrupt(dir, b.CID(), off); err == nil {
			t.Errorf("Corrupt at offset %d of a 10-byte block: nil error", off)
		}
	}
	s, err = boltstore.Open(dir, &boltstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []cas.Block{a, p} {
		_, err = s.Get(ctx, c.CID())
		var ce *cas.CorruptError
		if !errors.As(err, &ce) || !ce.CID.Equals(c.CID()) {
			t.Errorf("Get of the corrupted block = %v, want a *cas.CorruptError", err)
		}
		if err := s.View(ctx, c.CID(), func([]byte) error { return nil }); !errors.Is(err, cas.ErrCorrupt) {
			t.Errorf("View of the corrupted block = %v, want cas.ErrCorrupt", err)
		}
	}
	if got, err := s.Get(ctx, b.CID()); err != nil || !bytes.Equal(got, b.Data()) {
		t.Errorf("Get of the untouched block = %v", err)
	}
	sizes := map[cid.Cid]int{}
	s.AllKeys(ctx, func(c cid.Cid, n int) error {
		sizes[c] = n
		return nil
	})
	for _, c := range []cas.Block{a, p} {
		if sizes[c.CID()] != len(c.Data()) {
			t.Errorf("corrupted block has size %d, want %d", sizes[c.CID()], len(c.Data()))
		}
	}
}

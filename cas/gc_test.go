package cas_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
)

func TestGCKeepsPinnedClosure(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	keep := randomBytes(2*cas.ChunkSize+1, 1)
	drop := randomBytes(cas.ChunkSize+1, 2)
	kc, _, err := cas.PutFile(ctx, st, bytes.NewReader(keep), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := cas.PutFile(ctx, st, bytes.NewReader(drop), nil); err != nil {
		t.Fatal(err)
	}
	if err := st.SetPin(ctx, "keep", kc); err != nil {
		t.Fatal(err)
	}
	dry, err := cas.GC(ctx, st, &cas.GCOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if countBlocks(t, st) != 7 {
		t.Fatalf("dry run removed blocks")
	}
	stats, err := cas.GC(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Removed != 3 || stats.Kept != 4 || stats.FreedBytes < int64(len(drop)) {
		t.Fatalf("stats %+v", stats)
	}
	if dry.Removed != stats.Removed || dry.FreedBytes != stats.FreedBytes {
		t.Fatalf("dry run %+v differs from real run %+v", dry, stats)
	}
	if countBlocks(t, st) != 4 {
		t.Fatalf("%d blocks left, want 4", countBlocks(t, st))
	}
	var out bytes.Buffer
	if _, err := cas.ReadFile(ctx, st, kc, &out, nil); err != nil || !bytes.Equal(out.Bytes(), keep) {
		t.Fatalf("pinned file damaged: %v", err)
	}
	// Unpinned, everything goes.
	if err := st.DeletePin(ctx, "keep"); err != nil {
		t.Fatal(err)
	}
	if _, err := cas.GC(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	if n := countBlocks(t, st); n != 0 {
		t.Fatalf("%d blocks left after unpinning", n)
	}
}

func TestGCRefusesOnMissingBlock(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	data := randomBytes(2*cas.ChunkSize, 3)
	c, _, err := cas.PutFile(ctx, st, bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	chunk := cas.NewBlock(cas.Raw, data[:cas.ChunkSize]).CID()
	if err := st.Delete(ctx, chunk); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cas.PutFile(ctx, st, bytes.NewReader([]byte("garbage")), nil); err != nil {
		t.Fatal(err)
	}
	if err := st.SetPin(ctx, "p", c); err != nil {
		t.Fatal(err)
	}
	before := countBlocks(t, st)
	_, err = cas.GC(ctx, st, nil)
	var nf *cas.NotFoundError
	if !errors.As(err, &nf) || nf.CID != chunk {
		t.Fatalf("got %v, want NotFoundError for %s", err, chunk)
	}
	if countBlocks(t, st) != before {
		t.Fatal("gc removed blocks after a failed mark")
	}
}

func TestFsck(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	data := randomBytes(3*cas.ChunkSize, 4)
	c, _, err := cas.PutFile(ctx, st, bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetPin(ctx, "f", c); err != nil {
		t.Fatal(err)
	}
	rep, err := cas.Fsck(ctx, st, nil)
	if err != nil || !rep.OK() || rep.Blocks != 4 {
		t.Fatalf("clean store: %+v, %v", rep, err)
	}
	chunk := cas.NewBlock(cas.Raw, data[cas.ChunkSize:2*cas.ChunkSize]).CID()
	bad := bytes.Clone(data[cas.ChunkSize : 2*cas.ChunkSize])
	bad[0] ^= 0x80
	st.Corrupt(chunk, bad)
	rep, err = cas.Fsck(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || len(rep.Bad) != 1 || rep.Bad[0].CID != chunk {
		t.Fatalf("corrupt chunk: %+v", rep)
	}
	last := cas.NewBlock(cas.Raw, data[2*cas.ChunkSize:]).CID()
	if err := st.Delete(ctx, last); err != nil {
		t.Fatal(err)
	}
	rep, err = cas.Fsck(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Missing) != 1 || rep.Missing[0].Pin != "f" {
		t.Fatalf("missing chunk: %+v", rep)
	}
}

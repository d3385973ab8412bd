package cas_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/ipfs/go-cid"
)

// carSeeds returns small CAR files for the fuzz targets: a bundle of each
// kind of block, it as CARv2, the start of go-car's sample and its bad
// section length vector.
func carSeeds(f *testing.F) [][]byte {
	ctx := context.Background()
	st := memstore.New()
	leaf := cas.NewBlock(cas.Raw, []byte("leaf"))
	top, err := cas.EncodeNode(map[string]any{"type": "hg/note@1", "leaf": leaf.CID(), "n": int64(-3)})
	if err != nil {
		f.Fatal(err)
	}
	node := cas.NewBlock(cas.DagCBOR, top)
	if err := st.Put(ctx, leaf, node); err != nil {
		f.Fatal(err)
	}
	var v1 bytes.Buffer
	if _, err := cas.ExportCAR(ctx, st, []cid.Cid{node.CID(), leaf.CID()}, &v1, nil); err != nil {
		f.Fatal(err)
	}
	seeds := [][]byte{v1.Bytes(), wrapV2(v1.Bytes(), 3)}
	for _, name := range []string{sampleCAR, badSectionCAR} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, data[:min(len(data), 4096)])
	}
	return seeds
}

// FuzzCARReader reads arbitrary bytes as a CAR file: it must never panic,
// every error must be a *CARError, and sections must come in file order,
// within the limits.
func FuzzCARReader(f *testing.F) {
	for _, s := range carSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cr, err := cas.NewCARReader(bytes.NewReader(data))
		if err != nil {
			var ce *cas.CARError
			if !errors.As(err, &ce) {
				t.Fatalf("NewCARReader: %v is not a *CARError", err)
			}
			return
		}
		last := int64(-1)
		for {
			s, err := cr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				var ce *cas.CARError
				if !errors.As(err, &ce) || ce.Offset <= last || ce.Offset > int64(len(data)) {
					t.Fatalf("Next: %v: not a *CARError after offset %d", err, last)
				}
				break
			}
			if s.Offset <= last || !s.CID.Defined() || len(s.Data) > cas.MaxBlockSize || cr.Offset() > int64(len(data)) {
				t.Fatalf("section at %d (after %d), CID %v, %d bytes, reader at %d of %d", s.Offset, last, s.CID, len(s.Data), cr.Offset(), len(data))
			}
			last = s.Offset
		}
	})
}

// FuzzImportCAR imports arbitrary bytes into an empty store: all or
// nothing. A refused file leaves no block and no pin; an accepted one
// leaves every root pinned with its whole closure.
func FuzzImportCAR(f *testing.F) {
	for _, s := range carSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		st := memstore.New()
		res, err := cas.ImportCAR(ctx, st, bytes.NewReader(data), nil)
		pins, perr := st.Pins(ctx)
		if perr != nil {
			t.Fatal(perr)
		}
		if err != nil {
			if n := countBlocks(t, st); n != 0 || len(pins) != 0 {
				t.Fatalf("refused (%v) but left %d blocks and %d pins", err, n, len(pins))
			}
			return
		}
		if len(pins) != len(res.Roots) || countBlocks(t, st) != res.NewBlocks || res.NewBlocks != res.Blocks {
			t.Fatalf("result %+v, %d pins, %d blocks", res, len(pins), countBlocks(t, st))
		}
		for _, p := range pins {
			if err := cas.CheckClosure(ctx, st, p.CID); err != nil {
				t.Fatalf("pin %s: %v", p.Name, err)
			}
		}
	})
}

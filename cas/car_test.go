package cas_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/boltstore"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/cas/storetest"
	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
	"github.com/multiformats/go-varint"
)

// The CAR vectors in testdata/car come from go-car's test data (license
// beside them).
const (
	sampleCAR          = "testdata/car/sample-v1.car"
	badSectionCAR      = "testdata/car/badsectionlength.car"
	sampleRoot         = "bafy2bzaced4ueelaegfs5fqu4tzsh6ywbbpfk3cxppupmxfdhbpbhzawfw5oy"
	sampleBlocks       = 1049
	sampleDagCBOR      = 1043
	sampleRaw          = 6
	sampleNonCanonical = 140
)

// stores are the Store implementations bundles are imported into.
var stores = []struct {
	name string
	open func(t *testing.T) cas.Store
}{
	{"memstore", func(t *testing.T) cas.Store { return memstore.New() }},
	{"boltstore", openBolt},
}

func openBolt(t *testing.T) cas.Store {
	t.Helper()
	dir := filepath.Join(t.TempDir(), ".haygent")
	if err := boltstore.Init(dir); err != nil {
		t.Fatal(err)
	}
	st, err := boltstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// storeState is everything an import may change: every block's bytes and
// every pin.
type storeState struct {
	blocks map[cid.Cid]string
	pins   []cas.Pin
}

func takeState(t *testing.T, st cas.Store) storeState {
	t.Helper()
	ctx := context.Background()
	s := storeState{blocks: map[cid.Cid]string{}}
	err := st.AllKeys(ctx, func(c cid.Cid, _ int) error {
		data, err := st.Get(ctx, c)
		s.blocks[c] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.pins, err = st.Pins(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s storeState) equal(o storeState) bool {
	if len(s.blocks) != len(o.blocks) || !slices.Equal(s.pins, o.pins) {
		return false
	}
	for c, d := range s.blocks {
		if o.blocks[c] != d {
			return false
		}
	}
	return true
}

// checkUnchanged fails unless st is as before was taken.
func checkUnchanged(t *testing.T, st cas.Store, before storeState) {
	t.Helper()
	after := takeState(t, st)
	if !before.equal(after) {
		t.Fatalf("store changed: %d blocks and pins %v before, %d blocks and pins %v after",
			len(before.blocks), before.pins, len(after.blocks), after.pins)
	}
}

// testDAG stores a small DAG of every kind hg makes, and returns the
// source store and the roots to export: an hg object linking a file, a
// raw block and a foreign node; the file again; the hg object again.
func testDAG(t *testing.T, fileSize int) (cas.Store, []cid.Cid) {
	t.Helper()
	ctx := context.Background()
	st := memstore.New()
	file, _, err := cas.PutFile(ctx, st, bytes.NewReader(randomBytes(fileSize, 7)), nil)
	if err != nil {
		t.Fatal(err)
	}
	raw := cas.NewBlock(cas.Raw, []byte("a raw block"))
	foreign := nodeBlock(t, map[string]any{"name": "from another tool", "raw": raw.CID()})
	top := nodeBlock(t, map[string]any{"type": "hg/note@1", "file": file, "raw": raw.CID(), "other": foreign.CID()})
	if err := st.Put(ctx, raw, foreign, top); err != nil {
		t.Fatal(err)
	}
	return st, []cid.Cid{top.CID(), file, top.CID()}
}

func nodeBlock(t *testing.T, n any) cas.Block {
	t.Helper()
	data, err := cas.EncodeNode(n)
	if err != nil {
		t.Fatal(err)
	}
	return cas.NewBlock(cas.DagCBOR, data)
}

func exportCAR(t *testing.T, st cas.Store, roots []cid.Cid) []byte {
	t.Helper()
	var buf bytes.Buffer
	var last int64
	res, err := cas.ExportCAR(context.Background(), st, roots, &buf, &cas.ExportOptions{Progress: func(n int64) { last = n }})
	if err != nil {
		t.Fatalf("ExportCAR: %v", err)
	}
	if res.Size != int64(buf.Len()) || last != res.Size {
		t.Fatalf("ExportCAR says %d bytes, progress %d, wrote %d", res.Size, last, buf.Len())
	}
	return buf.Bytes()
}

// sections lists the sections of a CAR file.
func sections(t *testing.T, car []byte) []cas.Section {
	t.Helper()
	cr, err := cas.NewCARReader(bytes.NewReader(car))
	if err != nil {
		t.Fatal(err)
	}
	var out []cas.Section
	for {
		s, err := cr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
}

func TestBundleRoundTrip(t *testing.T) {
	ctx := context.Background()
	src, roots := testDAG(t, 3*cas.ChunkSize+100)
	car := exportCAR(t, src, roots)
	if again := exportCAR(t, src, roots); !bytes.Equal(car, again) {
		t.Fatal("two exports of the same roots differ")
	}
	want := takeState(t, src)
	secs := sections(t, car)
	if len(secs) != len(want.blocks) {
		t.Fatalf("bundle has %d sections, the closure %d blocks", len(secs), len(want.blocks))
	}
	if secs[0].CID != roots[0] {
		t.Fatalf("first section is %s, want the first root %s", secs[0].CID, roots[0])
	}
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			dst := s.open(t)
			var last int64
			res, err := cas.ImportCAR(ctx, dst, bytes.NewReader(car), &cas.ImportOptions{Progress: func(n int64) { last = n }})
			if err != nil {
				t.Fatalf("ImportCAR: %v", err)
			}
			if res.Blocks != len(want.blocks) || res.NewBlocks != res.Blocks || res.CARVersion != 1 || last != int64(len(car)) || res.Size != int64(len(car)) {
				t.Fatalf("result %+v, progress %d, for %d blocks in %d bytes", res, last, len(want.blocks), len(car))
			}
			wantPins := []cas.Pin{{Name: cas.BundlePinName(roots[0]), CID: roots[0]}, {Name: cas.BundlePinName(roots[1]), CID: roots[1]}}
			if !slices.Equal(res.Roots, wantPins) {
				t.Fatalf("roots %v, want %v", res.Roots, wantPins)
			}
			got := takeState(t, dst)
			slices.SortFunc(wantPins, func(a, b cas.Pin) int { return strings.Compare(a.Name, b.Name) })
			if !slices.Equal(got.pins, wantPins) || !(storeState{blocks: want.blocks}).equal(storeState{blocks: got.blocks}) {
				t.Fatalf("imported store differs from the source: %d blocks, pins %v", len(got.blocks), got.pins)
			}
			if again := exportCAR(t, dst, roots); !bytes.Equal(again, car) {
				t.Fatal("exporting the imported closure gives other bytes")
			}
			// Importing again adds nothing and changes nothing.
			res, err = cas.ImportCAR(ctx, dst, bytes.NewReader(car), nil)
			if err != nil || res.NewBlocks != 0 {
				t.Fatalf("second import: %+v, %v", res, err)
			}
			checkUnchanged(t, dst, got)
		})
	}
}

// wrapV2 wraps a CARv1 file in a CARv2 one, with padding before the data
// and an index-like tail after it, as go-car writes them.
func wrapV2(v1 []byte, pad int) []byte {
	pragma := []byte{0x0a, 0xa1, 0x67, 'v', 'e', 'r', 's', 'i', 'o', 'n', 0x02}
	var h [40]byte
	h[0] = 0x80 // "fully indexed"
	offset := uint64(len(pragma) + len(h) + pad)
	binary.LittleEndian.PutUint64(h[16:], offset)
	binary.LittleEndian.PutUint64(h[24:], uint64(len(v1)))
	binary.LittleEndian.PutUint64(h[32:], offset+uint64(len(v1)))
	out := append(append([]byte{}, pragma...), h[:]...)
	out = append(out, make([]byte, pad)...)
	out = append(out, v1...)
	return append(out, []byte("an index the reader ignores")...)
}

func TestBundleCARv2(t *testing.T) {
	ctx := context.Background()
	src, roots := testDAG(t, cas.ChunkSize+1)
	v1 := exportCAR(t, src, roots)
	const pad = 13
	v2 := wrapV2(v1, pad)
	dst := memstore.New()
	res, err := cas.ImportCAR(ctx, dst, bytes.NewReader(v2), nil)
	if err != nil {
		t.Fatalf("ImportCAR of CARv2: %v", err)
	}
	if res.CARVersion != 2 || res.Blocks != len(sections(t, v1)) || len(res.Roots) != 2 {
		t.Fatalf("result %+v", res)
	}
	if !bytes.Equal(exportCAR(t, dst, roots), v1) {
		t.Fatal("the closure read from CARv2 differs from the CARv1 inside it")
	}

	// Offsets in errors count from the start of the CARv2 file.
	last := sections(t, v1)[len(sections(t, v1))-1]
	bad := bytes.Clone(v2)
	dataStart := 11 + 40 + pad
	bad[dataStart+len(v1)-1] ^= 1
	fresh := memstore.New()
	_, err = cas.ImportCAR(ctx, fresh, bytes.NewReader(bad), nil)
	checkCARError(t, err, int64(dataStart)+last.Offset, last.CID, cas.ErrCorrupt)
	if countBlocks(t, fresh) != 0 {
		t.Fatal("a refused CARv2 left blocks behind")
	}

	// A CARv2 whose data size runs past the file, or ends mid-section.
	for _, cut := range []int{len(v1) + 1, len(v1) - 1} {
		b := bytes.Clone(v2)
		binary.LittleEndian.PutUint64(b[11+24:], uint64(cut))
		if cut > len(v1) {
			b = b[:dataStart+len(v1)]
		}
		_, err := cas.ImportCAR(ctx, memstore.New(), bytes.NewReader(b), nil)
		if !errors.Is(err, cas.ErrBadCAR) {
			t.Errorf("data size %d of %d: got %v, want a malformed CAR", cut, len(v1), err)
		}
	}
}

// checkCARError fails unless err is a *CARError at offset naming c (if
// defined) and wrapping want.
func checkCARError(t *testing.T, err error, offset int64, c cid.Cid, want error) {
	t.Helper()
	var ce *cas.CARError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want a *CARError", err)
	}
	if ce.Offset != offset || (c.Defined() && ce.CID != c) || !errors.Is(err, want) {
		t.Fatalf("got %v (offset %d, CID %s), want offset %d, CID %s, wrapping %v", err, ce.Offset, ce.CID, offset, c, want)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("at byte %d", offset)) || (c.Defined() && !strings.Contains(err.Error(), c.String())) {
		t.Fatalf("message %q names neither the offset nor the CID", err)
	}
}

// TestBundleTamperedSection flips a byte in sections at the start, middle
// and end of a bundle big enough that the import has stored several
// batches when it finds the damage, into stores that already hold some
// of its blocks and a pin: the import is refused naming the section, and
// the store is left exactly as it was.
func TestBundleTamperedSection(t *testing.T) {
	ctx := context.Background()
	src, roots := testDAG(t, 40*cas.ChunkSize)
	car := exportCAR(t, src, roots)
	secs := sections(t, car)
	for _, s := range stores {
		for _, i := range []int{0, len(secs) / 2, len(secs) - 1} {
			t.Run(fmt.Sprintf("%s/section%d", s.name, i), func(t *testing.T) {
				dst := s.open(t)
				pre := cas.NewBlock(cas.Raw, []byte("already here"))
				shared, err := src.Get(ctx, secs[3].CID)
				if err != nil {
					t.Fatal(err)
				}
				if err := dst.Put(ctx, pre, cas.NewBlock(cas.Raw, shared)); err != nil {
					t.Fatal(err)
				}
				if err := dst.SetPin(ctx, cas.BundlePinName(roots[1]), pre.CID()); err != nil {
					t.Fatal(err)
				}
				before := takeState(t, dst)
				bad := bytes.Clone(car)
				sec := secs[i]
				end := int(sec.Offset) + varint.UvarintSize(uint64(sec.CID.ByteLen()+len(sec.Data))) + sec.CID.ByteLen() + len(sec.Data)
				bad[end-1] ^= 0x40
				_, err = cas.ImportCAR(ctx, dst, bytes.NewReader(bad), nil)
				checkCARError(t, err, sec.Offset, sec.CID, cas.ErrCorrupt)
				checkUnchanged(t, dst, before)
			})
		}
	}
}

// TestBundleTruncated cuts a bundle at every length: each is refused and
// leaves the store as it was; a cut inside the header or a section is
// malformed framing.
func TestBundleTruncated(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	a := cas.NewBlock(cas.Raw, []byte("leaf a"))
	b := cas.NewBlock(cas.Raw, []byte("leaf b"))
	top := nodeBlock(t, map[string]any{"a": a.CID(), "b": b.CID()})
	if err := st.Put(ctx, a, b, top); err != nil {
		t.Fatal(err)
	}
	car := exportCAR(t, st, []cid.Cid{top.CID()})
	boundaries := map[int]bool{}
	for _, s := range sections(t, car) {
		boundaries[int(s.Offset)] = true
	}
	for n := range len(car) {
		dst := memstore.New()
		_, err := cas.ImportCAR(ctx, dst, bytes.NewReader(car[:n]), nil)
		if err == nil {
			t.Fatalf("a bundle cut at %d of %d bytes was imported", n, len(car))
		}
		if !boundaries[n] && !errors.Is(err, cas.ErrBadCAR) {
			t.Fatalf("cut at %d: got %v, want a malformed CAR", n, err)
		}
		if boundaries[n] && !errors.Is(err, cas.ErrNotFound) {
			t.Fatalf("cut at section boundary %d: got %v, want an incomplete closure", n, err)
		}
		if countBlocks(t, dst) != 0 {
			t.Fatalf("cut at %d: blocks left behind", n)
		}
	}
}

// carBytes frames a CAR file by hand: a header, then sections of raw
// bytes, so tests can write what no CARWriter would.
func carBytes(header []byte, secs ...[]byte) []byte {
	var out []byte
	for _, p := range append([][]byte{header}, secs...) {
		out = binary.AppendUvarint(out, uint64(len(p)))
		out = append(out, p...)
	}
	return out
}

func header(t *testing.T, h map[string]any) []byte {
	t.Helper()
	data, err := cas.EncodeNode(h)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func section(c cid.Cid, data []byte) []byte { return append(c.Bytes(), data...) }

func TestBundleFraming(t *testing.T) {
	leaf := cas.NewBlock(cas.Raw, []byte("leaf"))
	good := header(t, map[string]any{"roots": []any{leaf.CID()}, "version": int64(1)})
	v1Len := len(carBytes(good))
	huge := binary.AppendUvarint(carBytes(good), cas.MaxCARSectionSize+1)
	bigBlock := make([]byte, cas.MaxBlockSize+1)
	tests := []struct {
		name   string
		car    []byte
		offset int64
		want   error
		msg    string
	}{
		{"empty file", nil, 0, cas.ErrBadCAR, "empty file"},
		{"header length only", []byte{0x20}, 0, cas.ErrBadCAR, "truncated"},
		{"zero-length header", []byte{0x00}, 0, cas.ErrBadCAR, "empty header"},
		{"oversize header", binary.AppendUvarint(nil, cas.MaxCARHeaderSize+1), 0, cas.ErrBadCAR, "over the limit"},
		{"header not CBOR", carBytes([]byte{0xff, 0xff}), 0, cas.ErrBadCAR, "not a CAR header"},
		{"header not a map", carBytes(header(t, map[string]any{"version": "1"})), 0, cas.ErrBadCAR, "not a CAR header"},
		{"version 3", carBytes(header(t, map[string]any{"roots": []any{leaf.CID()}, "version": int64(3)})), 0, cas.ErrBadCAR, "version 3"},
		{"no version", carBytes(header(t, map[string]any{"roots": []any{leaf.CID()}})), 0, cas.ErrBadCAR, "version 0"},
		{"no roots", carBytes(header(t, map[string]any{"roots": []any{}, "version": int64(1)}), section(leaf.CID(), leaf.Data())), -1, cas.ErrInvalid, "no roots"},
		{"non-minimal varint", append(carBytes(good), 0x85, 0x00), int64(v1Len), cas.ErrBadCAR, "not minimally encoded"},
		{"zero-length section", append(carBytes(good), 0x00), int64(v1Len), cas.ErrBadCAR, "empty section"},
		{"oversize section", huge, int64(v1Len), cas.ErrBadCAR, "over the limit"},
		{"oversize block", carBytes(good, section(leaf.CID(), bigBlock)), int64(v1Len), cas.ErrBadCAR, "over the limit"},
		{"bad CID", carBytes(good, []byte{0x01, 0x55, 0x12, 0x20, 0x00}), int64(v1Len), cas.ErrBadCAR, "bad CID"},
		{"truncated CID", append(carBytes(good), append([]byte{40}, leaf.CID().Bytes()[:10]...)...), int64(v1Len), cas.ErrBadCAR, "truncated"},
		{"truncated data", carBytes(good, section(leaf.CID(), leaf.Data()))[:v1Len+20+len(leaf.Data())], int64(v1Len), cas.ErrBadCAR, "truncated"},
		{"v2 inside v2", wrapV2(wrapV2(carBytes(good, section(leaf.CID(), leaf.Data())), 0), 0), 51, cas.ErrBadCAR, "version 2"},
		{"v2 header cut", wrapV2(carBytes(good), 0)[:30], 11, cas.ErrBadCAR, "truncated"},
		{"v2 data offset inside header", func() []byte {
			b := wrapV2(carBytes(good), 0)
			binary.LittleEndian.PutUint64(b[11+16:], 20)
			return b
		}(), 11, cas.ErrBadCAR, "inside the header"},
		{"v2 data offset past the end", func() []byte {
			b := wrapV2(carBytes(good), 0)
			binary.LittleEndian.PutUint64(b[11+16:], 1<<40)
			return b
		}(), 11, cas.ErrBadCAR, "before the data offset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := memstore.New()
			_, err := cas.ImportCAR(context.Background(), st, bytes.NewReader(tt.car), nil)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("got %v, want %v mentioning %q", err, tt.want, tt.msg)
			}
			if tt.offset >= 0 {
				checkCARError(t, err, tt.offset, cid.Undef, tt.want)
			}
			if countBlocks(t, st) != 0 {
				t.Fatal("a refused bundle left blocks behind")
			}
		})
	}
}

// TestCARReaderNoRoots reads a header with no roots: the CAR
// specification allows it, so the reader does; ImportCAR refuses it.
func TestCARReaderNoRoots(t *testing.T) {
	leaf := cas.NewBlock(cas.Raw, []byte("leaf"))
	car := carBytes(header(t, map[string]any{"roots": []any{}, "version": int64(1)}), section(leaf.CID(), leaf.Data()))
	cr, err := cas.NewCARReader(bytes.NewReader(car))
	if err != nil {
		t.Fatal(err)
	}
	if len(cr.Roots()) != 0 || cr.Version() != 1 {
		t.Fatalf("roots %v, version %d", cr.Roots(), cr.Version())
	}
	s, err := cr.Next()
	if err != nil || s.CID != leaf.CID() || !bytes.Equal(s.Data, leaf.Data()) {
		t.Fatalf("Next: %v, %v", s, err)
	}
	if _, err := cr.Next(); err != io.EOF {
		t.Fatalf("after the last section: %v, want io.EOF", err)
	}
}

func TestBundleDuplicates(t *testing.T) {
	ctx := context.Background()
	leaf := cas.NewBlock(cas.Raw, []byte("leaf"))
	top := nodeBlock(t, map[string]any{"l": leaf.CID(), "again": leaf.CID()})
	h := header(t, map[string]any{"roots": []any{top.CID(), top.CID()}, "version": int64(1)})
	car := carBytes(h, section(top.CID(), top.Data()), section(leaf.CID(), leaf.Data()), section(leaf.CID(), leaf.Data()), section(top.CID(), top.Data()))
	st := memstore.New()
	res, err := cas.ImportCAR(ctx, st, bytes.NewReader(car), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Blocks != 2 || res.NewBlocks != 2 || len(res.Roots) != 1 || countBlocks(t, st) != 2 {
		t.Fatalf("result %+v, %d blocks stored", res, countBlocks(t, st))
	}

	// A repeated section is checked as well: a bad second copy is refused.
	bad := bytes.Clone(car)
	bad[len(bad)-1] ^= 1
	secs := sections(t, car)
	_, err = cas.ImportCAR(ctx, memstore.New(), bytes.NewReader(bad), nil)
	checkCARError(t, err, secs[3].Offset, top.CID(), cas.ErrCorrupt)
}

// TestBundleObjects: hg objects must be canonical and well formed;
// anything else is stored as opaque bytes, canonical or not.
func TestBundleObjects(t *testing.T) {
	ctx := context.Background()
	leaf := cas.NewBlock(cas.Raw, []byte("leaf"))
	// {"a": 1, "type": T} with 1 written in two bytes (0x18 0x01): every
	// decoder reads it, but it is not canonical.
	nonCanonical := func(typ string) cas.Block {
		data := []byte{0xa2, 0x61, 'a', 0x18, 0x01, 0x64, 't', 'y', 'p', 'e', 0x60 + byte(len(typ))}
		return cas.NewBlock(cas.DagCBOR, append(data, typ...))
	}
	badFile := nodeBlock(t, map[string]any{"type": cas.TypeFile, "size": int64(4), "height": int64(0), "links": []any{nodeBlock(t, map[string]any{}).CID()}})
	tests := []struct {
		name  string
		block cas.Block
		want  error // nil: imported
	}{
		{"canonical hg object", nodeBlock(t, map[string]any{"type": "hg/note@1", "leaf": leaf.CID()}), nil},
		{"non-canonical foreign node", nonCanonical("theirs/1"), nil},
		{"non-canonical hg object", nonCanonical("hg/note@1"), cas.ErrNotCanonical},
		{"malformed hg/file@1", badFile, cas.ErrInvalid},
		{"foreign codec leaf", mustBlockV1(t, 0x0129, []byte(`{"a":1}`)), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := header(t, map[string]any{"roots": []any{tt.block.CID()}, "version": int64(1)})
			if tt.block.CID().Type() == 0x0129 { // hg cannot read its links: root it elsewhere
				h = header(t, map[string]any{"roots": []any{leaf.CID()}, "version": int64(1)})
			}
			car := carBytes(h, section(tt.block.CID(), tt.block.Data()), section(leaf.CID(), leaf.Data()))
			st := memstore.New()
			_, err := cas.ImportCAR(ctx, st, bytes.NewReader(car), nil)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if ok, _ := st.Has(ctx, tt.block.CID()); !ok {
					t.Fatal("block not stored")
				}
				return
			}
			checkCARError(t, err, int64(len(carBytes(h))), tt.block.CID(), tt.want)
			if countBlocks(t, st) != 0 {
				t.Fatal("a refused bundle left blocks behind")
			}
		})
	}
}

// mustBlockV1 makes a block with a CIDv1 of any codec.
func mustBlockV1(t *testing.T, codec uint64, data []byte) cas.Block {
	t.Helper()
	c := cas.Sum(codec, data)
	b, err := cas.NewBlockWithCID(c, data)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBundleClosure: every block a root reaches must be in the bundle or
// the store, and readable, before the root is pinned.
func TestBundleClosure(t *testing.T) {
	ctx := context.Background()
	leaf := cas.NewBlock(cas.Raw, []byte("leaf"))
	top := nodeBlock(t, map[string]any{"l": leaf.CID()})
	h := header(t, map[string]any{"roots": []any{top.CID()}, "version": int64(1)})
	car := carBytes(h, section(top.CID(), top.Data()))

	st := memstore.New()
	_, err := cas.ImportCAR(ctx, st, bytes.NewReader(car), nil)
	var nf *cas.NotFoundError
	if !errors.As(err, &nf) || nf.CID != leaf.CID() || !strings.Contains(err.Error(), "incomplete") {
		t.Fatalf("got %v, want the missing leaf named", err)
	}
	if countBlocks(t, st) != 0 {
		t.Fatal("an incomplete bundle left blocks behind")
	}

	// With the leaf already in the store, the same bundle is whole.
	if err := st.Put(ctx, leaf); err != nil {
		t.Fatal(err)
	}
	res, err := cas.ImportCAR(ctx, st, bytes.NewReader(car), nil)
	if err != nil || res.NewBlocks != 1 {
		t.Fatalf("got %+v, %v", res, err)
	}

	// A root whose links hg cannot read is not pinned: gc could not walk it.
	opaque := mustBlockV1(t, 0x0129, []byte(`{"l":{"/":"`+leaf.CID().String()+`"}}`))
	car = carBytes(header(t, map[string]any{"roots": []any{opaque.CID()}, "version": int64(1)}), section(opaque.CID(), opaque.Data()), section(leaf.CID(), leaf.Data()))
	fresh := memstore.New()
	_, err = cas.ImportCAR(ctx, fresh, bytes.NewReader(car), nil)
	if !errors.Is(err, cas.ErrInvalid) || !strings.Contains(err.Error(), "cannot follow the links") {
		t.Fatalf("got %v, want a refusal to pin a closure hg cannot walk", err)
	}
	if countBlocks(t, fresh) != 0 {
		t.Fatal("blocks left behind")
	}
}

func TestBundleUnsupportedHash(t *testing.T) {
	data := []byte("leaf")
	h, err := mh.Encode(make([]byte, 32), 0xb401) // poseidon-bls12_381-a2-fc1: go-multihash cannot compute it
	if err != nil {
		t.Fatal(err)
	}
	c := cid.NewCidV1(cas.Raw, h)
	car := carBytes(header(t, map[string]any{"roots": []any{c}, "version": int64(1)}), section(c, data))
	st := memstore.New()
	_, err = cas.ImportCAR(context.Background(), st, bytes.NewReader(car), nil)
	if !errors.Is(err, cas.ErrInvalid) || !strings.Contains(err.Error(), "hash function poseidon-bls12_381-a2-fc1 is not one hg accepts") {
		t.Fatalf("got %v, want the hash function named as unsupported", err)
	}
	checkCARError(t, err, int64(len(carBytes(header(t, map[string]any{"roots": []any{c}, "version": int64(1)})))), c, cas.ErrInvalid)
	if countBlocks(t, st) != 0 {
		t.Fatal("blocks left behind")
	}
}

func TestBundlePinOption(t *testing.T) {
	ctx := context.Background()
	src, roots := testDAG(t, 10)
	one := exportCAR(t, src, roots[1:2])
	st := memstore.New()
	res, err := cas.ImportCAR(ctx, st, bytes.NewReader(one), &cas.ImportOptions{Pin: "mine/file"})
	if err != nil || !slices.Equal(res.Roots, []cas.Pin{{Name: "mine/file", CID: roots[1]}}) {
		t.Fatalf("got %+v, %v", res, err)
	}
	two := exportCAR(t, src, roots)
	before := takeState(t, st)
	if _, err := cas.ImportCAR(ctx, st, bytes.NewReader(two), &cas.ImportOptions{Pin: "mine/both"}); !errors.Is(err, cas.ErrInvalid) {
		t.Fatalf("a pin name for two roots: got %v", err)
	}
	if _, err := cas.ImportCAR(ctx, st, bytes.NewReader(one), &cas.ImportOptions{Pin: "../up"}); !errors.Is(err, cas.ErrInvalid) {
		t.Fatalf("a bad pin name: got %v", err)
	}
	checkUnchanged(t, st, before)
}

// failingPins fails the nth SetPin.
type failingPins struct {
	cas.Store
	n, calls int
}

func (s *failingPins) SetPin(ctx context.Context, name string, c cid.Cid) error {
	s.calls++
	if s.calls == s.n {
		return errors.New("disk full")
	}
	return s.Store.SetPin(ctx, name, c)
}

// TestBundleUndoPins: when the second root cannot be pinned, the first
// pin goes back to what it pointed at and the blocks go.
func TestBundleUndoPins(t *testing.T) {
	ctx := context.Background()
	src, roots := testDAG(t, 2*cas.ChunkSize)
	car := exportCAR(t, src, roots)
	mem := memstore.New()
	old := cas.NewBlock(cas.Raw, []byte("old"))
	if err := mem.Put(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := mem.SetPin(ctx, cas.BundlePinName(roots[0]), old.CID()); err != nil {
		t.Fatal(err)
	}
	before := takeState(t, mem)
	_, err := cas.ImportCAR(ctx, &failingPins{Store: mem, n: 2}, bytes.NewReader(car), nil)
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("got %v, want the pin failure", err)
	}
	checkUnchanged(t, mem, before)
}

// TestBundleCancel: an import whose context is cancelled part way still
// cleans up after itself.
func TestBundleCancel(t *testing.T) {
	src, roots := testDAG(t, 40*cas.ChunkSize)
	car := exportCAR(t, src, roots)
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			st := s.open(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			opts := &cas.ImportOptions{Progress: func(n int64) {
				if n > int64(len(car))*3/4 {
					cancel()
				}
			}}
			_, err := cas.ImportCAR(ctx, st, bytes.NewReader(car), opts)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want context.Canceled", err)
			}
			if n := countBlocks(t, st); n != 0 {
				t.Fatalf("a cancelled import left %d blocks", n)
			}
		})
	}
}

func TestBundleExportErrors(t *testing.T) {
	ctx := context.Background()
	src, roots := testDAG(t, 2*cas.ChunkSize)
	st := storetest.NewCorruptible(src)
	if _, err := cas.ExportCAR(ctx, st, nil, io.Discard, nil); !errors.Is(err, cas.ErrInvalid) {
		t.Fatalf("no roots: got %v", err)
	}
	// A writer that fails part way stops the export, which returns its error.
	if _, err := cas.ExportCAR(ctx, st, roots, &failWriter{left: cas.ChunkSize + 10}, nil); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("a failing writer: got %v", err)
	}
	chunk := sections(t, exportCAR(t, st, roots[1:2]))[1]
	st.Corrupt(chunk.CID, []byte("not the chunk"))
	if _, err := cas.ExportCAR(ctx, st, roots, io.Discard, nil); !errors.Is(err, cas.ErrCorrupt) {
		t.Fatalf("a damaged chunk: got %v, want ErrCorrupt", err)
	}
	if err := st.Delete(ctx, chunk.CID); err != nil {
		t.Fatal(err)
	}
	var nf *cas.NotFoundError
	if _, err := cas.ExportCAR(ctx, st, roots, io.Discard, nil); !errors.As(err, &nf) || nf.CID != chunk.CID {
		t.Fatalf("a missing chunk: got %v", err)
	}
}

// failWriter fails once it has taken left bytes.
type failWriter struct{ left int }

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		n := w.left
		w.left = 0
		return n, errors.New("disk full")
	}
	w.left -= len(p)
	return len(p), nil
}

// TestBundleSampleVector imports a CARv1 file made by go-car: 1049 blocks
// under blake2b-256, 140 of its DAG-CBOR blocks not canonical, stored
// as opaque blocks all the same; exporting its root gives the file back
// byte for byte.
func TestBundleSampleVector(t *testing.T) {
	ctx := context.Background()
	car, err := os.ReadFile(sampleCAR)
	if err != nil {
		t.Fatal(err)
	}
	root, err := cas.ParseCID(sampleRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			st := s.open(t)
			res, err := cas.ImportCAR(ctx, st, bytes.NewReader(car), nil)
			if err != nil {
				t.Fatalf("ImportCAR: %v", err)
			}
			if res.Blocks != sampleBlocks || res.NewBlocks != sampleBlocks || !slices.Equal(res.Roots, []cas.Pin{{Name: cas.BundlePinName(root), CID: root}}) {
				t.Fatalf("result %+v", res)
			}
			var dagCBOR, raw, nonCanonical int
			err = st.AllKeys(ctx, func(c cid.Cid, _ int) error {
				switch c.Type() {
				case cas.Raw:
					raw++
				case cas.DagCBOR:
					dagCBOR++
					data, err := st.Get(ctx, c)
					if err != nil {
						return err
					}
					if _, err := cas.DecodeNode(data); errors.Is(err, cas.ErrNotCanonical) {
						nonCanonical++
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if dagCBOR != sampleDagCBOR || raw != sampleRaw || nonCanonical != sampleNonCanonical {
				t.Fatalf("%d dag-cbor (%d not canonical), %d raw; want %d (%d), %d", dagCBOR, nonCanonical, raw, sampleDagCBOR, sampleNonCanonical, sampleRaw)
			}
			rep, err := cas.Fsck(ctx, st, nil)
			if err != nil || !rep.OK() || rep.Blocks != sampleBlocks {
				t.Fatalf("fsck: %+v, %v", rep, err)
			}
			if !bytes.Equal(exportCAR(t, st, []cid.Cid{root}), car) {
				t.Fatal("exporting the root does not give the file back")
			}
		})
	}
}

// TestBundleBadSectionLengthVector reads go-car's badsectionlength.car,
// whose first section declares about 200 GB: refused at its offset,
// before anything is allocated for it, and nothing is stored.
func TestBundleBadSectionLengthVector(t *testing.T) {
	car, err := os.ReadFile(badSectionCAR)
	if err != nil {
		t.Fatal(err)
	}
	cr, err := cas.NewCARReader(bytes.NewReader(car))
	if err != nil {
		t.Fatal(err)
	}
	_, err = cr.Next()
	checkCARError(t, err, 18, cid.Undef, cas.ErrBadCAR)
	if !strings.Contains(err.Error(), "length 216830324832 is over the limit") {
		t.Fatalf("got %v, want the declared length named", err)
	}
	if _, again := cr.Next(); again != err {
		t.Fatalf("Next after an error gave %v, want the same error", again)
	}
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			st := s.open(t)
			before := takeState(t, st)
			_, err := cas.ImportCAR(context.Background(), st, bytes.NewReader(car), nil)
			checkCARError(t, err, 18, cid.Undef, cas.ErrBadCAR)
			checkUnchanged(t, st, before)
		})
	}
}

// TestCARWriterHeader checks the header against the one go-car wrote.
func TestCARWriterHeader(t *testing.T) {
	car, err := os.ReadFile(sampleCAR)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := cas.ParseCID(sampleRoot)
	var buf bytes.Buffer
	cw, err := cas.NewCARWriter(&buf, []cid.Cid{root})
	if err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 || cw.Written() == 0 {
		t.Fatalf("a new CARWriter wrote %d bytes and counts %d", buf.Len(), cw.Written())
	}
	if err := cw.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(car, buf.Bytes()) {
		t.Fatalf("header %x, go-car wrote %x", buf.Bytes(), car[:buf.Len()])
	}
}

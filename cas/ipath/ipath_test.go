package ipath_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/ipath"
	"github.com/haygent/hg/cas/memstore"
	"github.com/ipfs/go-cid"
)

// loadCAR adds the blocks of a kubo-made CAR file (cas/unixfs/testdata)
// to st and returns its root.
func loadCAR(t *testing.T, st cas.Store, name string) cid.Cid {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "unixfs", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cr, err := cas.NewCARReader(f)
	if err != nil {
		t.Fatal(err)
	}
	for {
		s, err := cr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := cas.NewBlockWithCID(s.CID, s.Data)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	return cr.Roots()[0]
}

func resolve(t *testing.T, st cas.BlockReader, s string) (ipath.Result, error) {
	t.Helper()
	p, ok, err := ipath.Parse(s)
	if !ok || err != nil {
		t.Fatalf("Parse(%q) = %v, %v", s, ok, err)
	}
	return ipath.Resolve(context.Background(), st, p)
}

func TestParse(t *testing.T) {
	c := cas.Sum(cas.Raw, []byte("x")).String()
	for _, tt := range []struct {
		in   string
		ok   bool
		err  bool
		segs []string
	}{
		{c, true, false, nil},
		{c + "/a/b", true, false, []string{"a", "b"}},
		{"/ipfs/" + c + "/a/", true, false, []string{"a"}},
		{c + "//a", true, true, nil},
		{"mypin/a", false, false, nil},
		{"run-x/node", false, false, nil},
	} {
		p, ok, err := ipath.Parse(tt.in)
		if ok != tt.ok || (err != nil) != tt.err || strings.Join(p.Segments, "|") != strings.Join(tt.segs, "|") {
			t.Errorf("Parse(%q) = %q, %v, %v", tt.in, p.Segments, ok, err)
		}
	}
}

// Paths through hg trees: entries by name, never through a symlink.
func TestResolveHgTree(t *testing.T) {
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "a", "b.txt"), []byte("hello tree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	root, err := cas.PutTree(context.Background(), st, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := resolve(t, st, root.String()+"/a/b.txt")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := cas.ReadFile(context.Background(), st, res.CID, &buf, nil); err != nil || buf.String() != "hello tree\n" {
		t.Fatalf("a/b.txt reads %q, %v", buf.String(), err)
	}
	var se *ipath.SegmentError
	_, err = resolve(t, st, root.String()+"/a/nope")
	if !errors.As(err, &se) || se.Index != 1 || !errors.Is(err, cas.ErrNotFound) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("a/nope: %v, want a not-found error naming the segment", err)
	}
	if _, err := resolve(t, st, root.String()+"/link/b.txt"); !errors.As(err, &se) || !errors.Is(err, cas.ErrInvalid) {
		t.Errorf("link/b.txt: %v, want a refusal to follow the symlink", err)
	}
	if _, err := resolve(t, st, root.String()+"/a/b.txt/x"); !errors.As(err, &se) || se.Index != 2 {
		t.Errorf("a/b.txt/x: %v, want an error at segment x", err)
	}
}

// Paths through UnixFS directories made by kubo, plain and sharded; the
// CIDs are those kubo's recipe printed.
func TestResolveUnixFS(t *testing.T) {
	st := memstore.New()
	root := loadCAR(t, st, "gateway-json-cbor.car")
	res, err := resolve(t, st, "/ipfs/"+root.String()+"/ą/ę/file-źł.txt")
	if err != nil {
		t.Fatal(err)
	}
	if res.InBlock || res.CID.String() != "bafkreialihlqnf5uwo4byh4n3cmwlntwqzxxs2fg5vanqdi3d7tb2l5xkm" {
		t.Errorf("ą/ę/file-źł.txt = %+v, want kubo's FILE_CID", res)
	}
	res, err = resolve(t, st, root.String()+"/ą/ę/t.json")
	if err != nil || res.CID.String() != "bafkreibrppizs3g7axs2jdlnjua6vgpmltv7k72l7v7sa6mmht6mne3qqe" {
		t.Errorf("ą/ę/t.json = %v, %v, want kubo's FILE_JSON_CID", res.CID, err)
	}
	var se *ipath.SegmentError
	if _, err := resolve(t, st, root.String()+"/ą/ę/file-źł.txt/x"); !errors.As(err, &se) || !errors.Is(err, cas.ErrInvalid) {
		t.Errorf("a path into a raw file block: %v", err)
	}
	hamt := loadCAR(t, st, "single-layer-hamt-with-multi-block-files.car")
	if _, err := resolve(t, st, hamt.String()+"/999.txt"); err != nil {
		t.Errorf("HAMT 999.txt: %v", err)
	}
	if _, err := resolve(t, st, hamt.String()+"/1001.txt"); !errors.As(err, &se) || !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("HAMT 1001.txt: %v, want not found", err)
	}
}

// Paths through IPLD data: a map's keys, a list's indexes, links
// followed from block to block and into UnixFS.
func TestResolveIPLD(t *testing.T) {
	st := memstore.New()
	root := loadCAR(t, st, "dag-cbor-traversal.car")
	res, err := resolve(t, st, root.String()+"/foo/link")
	if err != nil || res.InBlock || res.CID.String() != "bafyreig5alecq2l2akgajxywgnv22kuxh6xcagsnelepylqovt4t5jxt6u" {
		t.Fatalf("foo/link = %+v, %v", res, err)
	}
	res, err = resolve(t, st, root.String()+"/foo/object/banana")
	if err != nil || !res.InBlock || res.Value != int64(10) || res.CID != root {
		t.Fatalf("foo/object/banana = %+v, %v, want 10 inside the root", res, err)
	}
	res, err = resolve(t, st, root.String()+"/foo/link/bar")
	if err != nil || res.CID.String() != "bafyreiaefvpp22slf5bzd4lqgzwbztqahwlldtqkpgmlhv7mh23pudle7y" {
		t.Fatalf("foo/link/bar = %+v, %v", res, err)
	}

	dir := loadCAR(t, st, "gateway-json-cbor.car")
	data, err := cas.EncodeNode(map[string]any{"list": []any{"zero", dir}, "n": int64(1)})
	if err != nil {
		t.Fatal(err)
	}
	b := cas.NewBlock(cas.DagCBOR, data)
	if err := st.Put(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	res, err = resolve(t, st, b.CID().String()+"/list/1/ą/ę/file-źł.txt")
	if err != nil || res.CID.String() != "bafkreialihlqnf5uwo4byh4n3cmwlntwqzxxs2fg5vanqdi3d7tb2l5xkm" {
		t.Fatalf("list/1/ą/ę/file-źł.txt = %+v, %v", res, err)
	}
	var se *ipath.SegmentError
	for seg, want := range map[string]error{
		"list/01":   cas.ErrInvalid,
		"list/-1":   cas.ErrInvalid,
		"list/2":    cas.ErrNotFound,
		"list/0/x":  cas.ErrInvalid,
		"n/x":       cas.ErrInvalid,
		"missing/x": cas.ErrNotFound,
	} {
		_, err := resolve(t, st, b.CID().String()+"/"+seg)
		if !errors.As(err, &se) || !errors.Is(err, want) {
			t.Errorf("%s: %v, want a segment error wrapping %v", seg, err, want)
		}
	}
}

// A block missing on the way is named; a damaged one is ErrCorrupt.
func TestResolveMissingBlock(t *testing.T) {
	st := memstore.New()
	gone := cas.Sum(cas.DagPB, []byte("never stored"))
	data, err := cas.EncodeNode(map[string]any{"to": gone})
	if err != nil {
		t.Fatal(err)
	}
	b := cas.NewBlock(cas.DagCBOR, data)
	if err := st.Put(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	_, err = resolve(t, st, b.CID().String()+"/to/x")
	if !errors.Is(err, cas.ErrNotFound) || !strings.Contains(err.Error(), gone.String()) {
		t.Errorf("resolve through a missing block: %v, want one naming %s", err, gone)
	}
}

func FuzzParse(f *testing.F) {
	c := cas.Sum(cas.Raw, []byte("x")).String()
	for _, s := range []string{c, c + "/a/b", "/ipfs/" + c + "/ą/", c + "//x", "pin/a", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, ok, err := ipath.Parse(s)
		if !ok || err != nil {
			return
		}
		// What parses prints back to a path that parses the same.
		q, ok, err := ipath.Parse(p.String())
		if !ok || err != nil || q.String() != p.String() || len(q.Segments) != len(p.Segments) {
			t.Fatalf("%q parsed to %q, which parses to %q, %v, %v", s, p, q, ok, err)
		}
		for _, seg := range p.Segments {
			if seg == "" || strings.Contains(seg, "/") {
				t.Fatalf("segment %q of %q", seg, s)
			}
		}
	})
}

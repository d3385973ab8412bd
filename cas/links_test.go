package cas_test

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

func cidsEqual(a, b []cid.Cid) bool {
	return slices.EqualFunc(a, b, func(x, y cid.Cid) bool { return x.Equals(y) })
}

func TestLinksDagCBOR(t *testing.T) {
	a := cas.Sum(cas.Raw, []byte("a"))
	b := cas.Sum(cas.DagCBOR, []byte("b"))
	c := cas.Sum(cas.Raw, []byte("c"))
	v0 := cid.NewCidV0(cas.Sum(cas.DagPB, []byte("d")).Hash())
	node := map[string]any{
		"ccc":  c,
		"a":    []any{a, map[string]any{"x": b, "y": []any{}}},
		"bb":   map[string]any{"inner": []any{[]any{v0}}, "n": int64(1)},
		"none": "not a link",
	}
	data, err := cas.EncodeNode(node)
	if err != nil {
		t.Fatal(err)
	}
	// The order the links appear in in the canonical block: keys length
	// first ("a", "bb", "ccc"), arrays in order. Map iteration must not
	// change it.
	want := []cid.Cid{a, b, v0, c}
	for range 50 {
		got, err := cas.Links(cas.Sum(cas.DagCBOR, data), data)
		if err != nil {
			t.Fatal(err)
		}
		if !cidsEqual(got, want) {
			t.Fatalf("Links = %v, want %v", got, want)
		}
	}

	// NewLinks leaves out the links the caller has met, and only them.
	for _, met := range [][]cid.Cid{nil, {b}, {a, c}, want} {
		known := func(raw []byte) bool {
			return slices.ContainsFunc(met, func(m cid.Cid) bool { return m.KeyString() == string(raw) })
		}
		got, err := cas.NewLinks(cas.Sum(cas.DagCBOR, data), data, known)
		rest := slices.DeleteFunc(slices.Clone(want), func(l cid.Cid) bool { return slices.Contains(met, l) })
		if err != nil || !cidsEqual(got, rest) {
			t.Fatalf("NewLinks with %v met = %v, %v; want %v", met, got, err, rest)
		}
	}

	// Many links under keys of one length come in bytewise key order.
	many := map[string]any{}
	var wantMany []cid.Cid
	for i := range 20 {
		l := cas.Sum(cas.Raw, []byte{byte(i)})
		many[string(rune('a'+i))] = l
		wantMany = append(wantMany, l)
	}
	data, _ = cas.EncodeNode(many)
	for range 20 {
		got, err := cas.Links(cas.Sum(cas.DagCBOR, data), data)
		if err != nil || !cidsEqual(got, wantMany) {
			t.Fatalf("Links = %v, %v; want %v", got, err, wantMany)
		}
	}

	// No links.
	data, _ = cas.EncodeNode(map[string]any{"a": []any{int64(1), "x", []byte{1}}})
	if got, err := cas.Links(cas.Sum(cas.DagCBOR, data), data); err != nil || len(got) != 0 {
		t.Errorf("Links of a block without links = %v, %v", got, err)
	}
}

// Links reads DAG-CBOR made by other tools leniently: it need not be
// canonical to be walked.
func TestLinksDagCBORLenient(t *testing.T) {
	tag := "d82a 5825 00" + testCIDHex
	for _, tt := range []struct {
		name string
		hex  string
		n    int // links expected; -1 for an error
	}{
		{"canonical", "a1 6161" + tag, 1},
		{"unsorted keys", "a2 6162" + tag + "6161 01", 1},
		{"non-shortest ints", "82 1801" + tag, 1},
		{"float16", "82 f93c00" + tag, 1},
		// Both values of a duplicated key count: a walk that keeps
		// more is safe, one that drops a link is not.
		{"duplicate keys", "a2 6161" + tag + "6161" + tag, 2},
		{"invalid UTF-8", "82 62c328" + tag, 1},
		// Only tag 42 is a link. Any other tag is opaque: a link beside
		// it is followed, nothing inside it is; a tag 42 inside it makes
		// the links unreadable (neither followed nor dropped).
		{"bignum", "82 c2 41 01" + tag, 1},
		{"link beside another tag", "82 d8 2b 82 01 02" + tag, 1},
		{"link inside another tag", "d8 2b 81" + tag, -1},
		{"link inside another tag, in a map", "a2 6161 d8 2b 81" + tag + "6162" + tag, -1},
		{"link two tags deep", "d8 2b d9 0100" + tag, -1},
		{"tag 42 inside a bignum", "c2" + tag, -1},
		{"tag 42 over a string", "d8 2a 61 61", -1},
		{"tag 42 without 0x00", "d8 2a 5824" + testCIDHex, -1},
		{"truncated", "82" + tag, -1},
		{"trailing bytes", tag + "00", -1},
		{"empty", "", -1},
	} {
		data := unhex(t, tt.hex)
		got, err := cas.Links(cas.Sum(cas.DagCBOR, data), data)
		if tt.n < 0 {
			if err == nil {
				t.Errorf("%s: Links = %v, want an error", tt.name, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: Links: %v", tt.name, err)
			continue
		}
		if len(got) != tt.n || !slices.ContainsFunc(got, testCID.Equals) || slices.ContainsFunc(got, func(c cid.Cid) bool { return !c.Equals(testCID) }) {
			t.Errorf("%s: Links = %v, want %d × %s", tt.name, got, tt.n, testCID)
		}
	}
}

// TestLinksOnlyTag42: a link hidden in another tag is refused with
// ErrInvalid, naming the tag, and a tag that holds no link hides nothing
// from the walk.
func TestLinksOnlyTag42(t *testing.T) {
	tag := "d82a 5825 00" + testCIDHex
	data := unhex(t, "a1 6161 d8 2b 81"+tag)
	links, err := cas.Links(cas.Sum(cas.DagCBOR, data), data)
	if !errors.Is(err, cas.ErrInvalid) || !strings.Contains(err.Error(), "tag 43 encloses a link (tag 42)") {
		t.Fatalf("Links = %v, %v; want ErrInvalid naming tag 43", links, err)
	}
	// Opaque tags around no link, under keys the scanner and the decoder
	// both read: only the tag-42 link counts.
	data = unhex(t, "a2 6161 d8 2b 82 01 02 6162"+tag)
	links, err = cas.Links(cas.Sum(cas.DagCBOR, data), data)
	if err != nil || !cidsEqual(links, []cid.Cid{testCID}) {
		t.Fatalf("Links = %v, %v; want [%s]", links, err, testCID)
	}
}

func TestLinksRaw(t *testing.T) {
	// Raw bytes never have links, whatever they look like.
	data, _ := cas.EncodeNode(testCID)
	got, err := cas.Links(cas.Sum(cas.Raw, data), data)
	if err != nil || got != nil {
		t.Errorf("Links(raw) = %v, %v; want none", got, err)
	}
}

// pbField appends a protobuf length-delimited field.
func pbField(b []byte, field int, body []byte) []byte {
	b = binary.AppendUvarint(b, uint64(field<<3|2))
	b = binary.AppendUvarint(b, uint64(len(body)))
	return append(b, body...)
}

// pbLink returns a PBLink: Hash (1), Name (2), Tsize (3).
func pbLink(hash []byte, name string, tsize uint64) []byte {
	b := pbField(nil, 1, hash)
	b = pbField(b, 2, []byte(name))
	b = binary.AppendUvarint(b, 3<<3|0)
	return binary.AppendUvarint(b, tsize)
}

func TestLinksDagPB(t *testing.T) {
	v0 := cid.NewCidV0(cas.Sum(cas.DagPB, []byte("child")).Hash())
	v1 := cas.Sum(cas.Raw, []byte("chunk"))
	var node []byte
	node = pbField(node, 2, pbLink(v0.Bytes(), "dir", 1234))
	node = pbField(node, 2, pbLink(v1.Bytes(), "", 300))
	node = pbField(node, 2, pbField(nil, 1, v1.Bytes())) // Hash only
	node = pbField(node, 1, []byte{0x08, 0x01})          // Data: UnixFS directory
	c := cas.Sum(cas.DagPB, node)
	got, err := cas.Links(c, node)
	if err != nil {
		t.Fatal(err)
	}
	if want := []cid.Cid{v0, v1, v1}; !cidsEqual(got, want) {
		t.Errorf("Links(dag-pb) = %v, want %v", got, want)
	}
	// A CIDv0 names dag-pb blocks too.
	if got, err := cas.Links(cid.NewCidV0(c.Hash()), node); err != nil || len(got) != 3 {
		t.Errorf("Links under a CIDv0 = %v, %v", got, err)
	}

	// An empty node and a node with only data have no links.
	for _, data := range [][]byte{nil, pbField(nil, 1, []byte("x"))} {
		if got, err := cas.Links(cas.Sum(cas.DagPB, data), data); err != nil || len(got) != 0 {
			t.Errorf("Links(%x) = %v, %v; want none", data, got, err)
		}
	}

	for _, tt := range []struct {
		name string
		data []byte
		err  error
	}{
		{"varint field at the top", []byte{0x08, 0x01}, cas.ErrInvalid},
		{"length past the end", []byte{0x12, 0x05, 0x0a}, cas.ErrInvalid},
		{"truncated key", []byte{0x80}, cas.ErrInvalid},
		{"fixed64 in a link", pbField(nil, 2, []byte{0x19, 1, 2, 3, 4, 5, 6, 7, 8}), cas.ErrInvalid},
		{"hash past the end", pbField(nil, 2, []byte{0x0a, 0x30, 0x01}), cas.ErrInvalid},
		{"hash not a CID", pbField(nil, 2, pbField(nil, 1, []byte{0xff, 0xff})), cas.ErrBadCID},
		{"truncated varint in a link", pbField(nil, 2, []byte{0x18, 0x80}), cas.ErrInvalid},
	} {
		got, err := cas.Links(cas.Sum(cas.DagPB, tt.data), tt.data)
		if !errors.Is(err, tt.err) {
			t.Errorf("%s: Links = %v, %v; want %v", tt.name, got, err, tt.err)
		}
	}
}

func TestLinksUnknownCodec(t *testing.T) {
	data := []byte(`{"/":"` + testCID.String() + `"}`)
	for _, codec := range []uint64{cas.DagJSON, 0x0200 /* json */, 0x78 /* git-raw */, 0x51 /* cbor */} {
		c := cas.Sum(codec, data)
		if got, err := cas.Links(c, data); !errors.Is(err, cas.ErrInvalid) {
			t.Errorf("Links(codec 0x%x) = %v, %v; want ErrInvalid", codec, got, err)
		}
	}
}

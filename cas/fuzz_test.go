package cas_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// walkLinks collects the links of a data model value in the order they
// appear in its canonical DAG-CBOR: map keys length first, then bytewise.
func walkLinks(v any, out []cid.Cid) []cid.Cid {
	switch x := v.(type) {
	case cid.Cid:
		out = append(out, x)
	case []any:
		for _, e := range x {
			out = walkLinks(e, out)
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int {
			if len(a) != len(b) {
				return len(a) - len(b)
			}
			return strings.Compare(a, b)
		})
		for _, k := range keys {
			out = walkLinks(x[k], out)
		}
	}
	return out
}

// hasReserved reports whether v holds a map DAG-JSON cannot represent:
// one whose first key is "/" with a string value, or with a map value
// whose first key is "bytes" with a string value.
func hasReserved(v any) bool {
	switch x := v.(type) {
	case []any:
		return slices.ContainsFunc(x, hasReserved)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k, e := range x {
			if hasReserved(e) {
				return true
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if len(keys) == 0 || keys[0] != "/" {
			return false
		}
		switch s := x["/"].(type) {
		case string:
			return true
		case map[string]any:
			inner := make([]string, 0, len(s))
			for k := range s {
				inner = append(inner, k)
			}
			slices.Sort(inner)
			_, isString := s["bytes"].(string)
			return isString && inner[0] == "bytes"
		}
	}
	return false
}

func FuzzDecodeNode(f *testing.F) {
	for _, fx := range loadFixtures(f) {
		f.Add(fx.cbor)
	}
	for _, s := range []string{
		"a2 6162 01 6161 02", "18 01", "f9 3c00", "9f 01 ff", "a2 6161 01 6161 02",
		"d8 2a 58 25 00" + testCIDHex, "d8 2a 58 24" + testCIDHex, "a1 01 01", "62 c328",
		"f7", "a1 61 2f 61 78", "a1 612f a1 656279746573 6161", "1b ffffffffffffffff",
		"3b ffffffffffffffff", "fb 8000000000000000", "c2 41 01", "d9 d9f7 01",
	} {
		f.Add(unhex(f, s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := cas.DecodeNode(data)
		if err != nil {
			if !errors.Is(err, cas.ErrNotCanonical) {
				t.Fatalf("DecodeNode(%x): %v does not wrap ErrNotCanonical", data, err)
			}
			return
		}
		again, err := cas.EncodeNode(v)
		if err != nil {
			t.Fatalf("EncodeNode(DecodeNode(%x)): %v", data, err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("EncodeNode(DecodeNode(%x)) = %x", data, again)
		}

		// A map's entries come out and go back in by byte surgery alone.
		if m, ok := v.(map[string]any); ok {
			checkMapEntries(t, data, m)
		}

		// Links sees the same links, in the same order.
		links, err := cas.Links(cas.Sum(cas.DagCBOR, data), data)
		if err != nil {
			t.Fatalf("Links of canonical %x: %v", data, err)
		}
		if want := walkLinks(v, nil); !cidsEqual(links, want) {
			t.Fatalf("Links(%x) = %v, want %v", data, links, want)
		}

		// DAG-JSON holds the same value, unless a map uses its reserved
		// namespace.
		j, err := cas.EncodeJSON(v)
		if err != nil {
			if !errors.Is(err, cas.ErrInvalid) || !hasReserved(v) {
				t.Fatalf("EncodeJSON(DecodeNode(%x)): %v", data, err)
			}
			return
		}
		if hasReserved(v) {
			t.Fatalf("EncodeJSON(DecodeNode(%x)) = %s, want an error", data, j)
		}
		w, err := cas.DecodeJSON(j)
		if err != nil {
			t.Fatalf("DecodeJSON(%s): %v", j, err)
		}
		back, err := cas.EncodeNode(w)
		if err != nil || !bytes.Equal(back, data) {
			t.Fatalf("%x -> %s -> %x, %v", data, j, back, err)
		}
	})
}

func FuzzDecodeJSON(f *testing.F) {
	for _, fx := range loadFixtures(f) {
		f.Add(fx.json)
	}
	for _, s := range []string{
		`{"b":1,"a":[1.5,-0.0,1e21,1E-7,"x\u00e9\ud83d\ude00\n"]}`,
		`{"/":{"bytes":"AAEC/w"}}`,
		`{"/":"QmXg9Pp2ytZ14xgmQjYEiHjVjMFXzCVVEcRTWJBmLgR39V"}`,
		`{"/":{"bytes":"foo","bar":"baz"}}`,
		`{"/":{"abar":"baz","bytes":"foo"}}`,
		`{"":1,"/":"x"}`,
		`{"/":true,"a":{"/":{"/":{"bytes":"AA"}}}}`,
		`[18446744073709551615,-18446744073709551616,9223372036854775808]`,
		`{"a":1,"a":2}`,
		` [ 1 , 2 ] `,
		`"\ud800"`,
		`1e400`,
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v1, err := cas.DecodeJSON(data)
		if err != nil {
			var je *cas.JSONError
			if !errors.Is(err, cas.ErrInvalid) || !errors.As(err, &je) {
				t.Fatalf("DecodeJSON(%q): %v is not a *JSONError wrapping ErrInvalid", data, err)
			}
			if je.Offset < 0 || je.Offset > len(data) {
				t.Fatalf("DecodeJSON(%q): offset %d out of range", data, je.Offset)
			}
			return
		}
		j1, err := cas.EncodeJSON(v1)
		if err != nil {
			t.Fatalf("EncodeJSON(DecodeJSON(%q)): %v", data, err)
		}
		v2, err := cas.DecodeJSON(j1)
		if err != nil {
			t.Fatalf("DecodeJSON(EncodeJSON(DecodeJSON(%q))) = DecodeJSON(%s): %v", data, j1, err)
		}
		j2, err := cas.EncodeJSON(v2)
		if err != nil || !bytes.Equal(j1, j2) {
			t.Fatalf("%q: EncodeJSON not stable: %s then %s, %v", data, j1, j2, err)
		}
		b1, err := cas.EncodeNode(v1)
		if err != nil {
			t.Fatalf("EncodeNode(DecodeJSON(%q)): %v", data, err)
		}
		b2, err := cas.EncodeNode(v2)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("%q: EncodeNode differs after a DAG-JSON round trip: %x then %x, %v", data, b1, b2, err)
		}
		n, err := cas.DecodeNode(b1)
		if err != nil {
			t.Fatalf("DecodeNode(EncodeNode(DecodeJSON(%q))) = DecodeNode(%x): %v", data, b1, err)
		}
		if j3, err := cas.EncodeJSON(n); err != nil || !bytes.Equal(j3, j1) {
			t.Fatalf("%q: via DAG-CBOR %s, directly %s, %v", data, j3, j1, err)
		}
		ind, err := cas.EncodeJSONIndent(v1, "\t")
		if err != nil {
			t.Fatalf("EncodeJSONIndent(DecodeJSON(%q)): %v", data, err)
		}
		v3, err := cas.DecodeJSON(ind)
		if err != nil {
			t.Fatalf("DecodeJSON(EncodeJSONIndent(DecodeJSON(%q))): %v\n%s", data, err, ind)
		}
		if j3, err := cas.EncodeJSON(v3); err != nil || !bytes.Equal(j3, j1) {
			t.Fatalf("%q: indented form reads back as %s, want %s, %v", data, j3, j1, err)
		}
	})
}

func FuzzLinks(f *testing.F) {
	for _, fx := range loadFixtures(f) {
		f.Add(fx.cbor)
	}
	var pb []byte
	pb = pbField(pb, 2, pbLink(cid.NewCidV0(testCID.Hash()).Bytes(), "a", 1))
	pb = pbField(pb, 2, pbLink(testCID.Bytes(), "", 2))
	pb = pbField(pb, 1, []byte{8, 1})
	f.Add(pb)
	f.Add(unhex(f, "d8 2b 81 d8 2a 58 25 00"+testCIDHex))
	f.Add(unhex(f, "a2 6162 d8 2a 58 25 00"+testCIDHex+" 6161 f93c00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, codec := range []uint64{cas.DagCBOR, cas.DagPB, cas.Raw} {
			links, err := cas.Links(cas.Sum(codec, data), data)
			if err != nil {
				continue
			}
			for _, l := range links {
				if !l.Defined() {
					t.Fatalf("Links(0x%x, %x) returned an undefined CID", codec, data)
				}
			}
		}
		// What the strict decoder accepts, the walker accepts too.
		if _, err := cas.DecodeNode(data); err == nil {
			if _, err := cas.Links(cas.Sum(cas.DagCBOR, data), data); err != nil {
				t.Fatalf("Links of canonical %x: %v", data, err)
			}
		}
	})
}

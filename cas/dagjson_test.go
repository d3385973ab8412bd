package cas_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// fixture is one folder of testdata/ipld-codec: a value in DAG-CBOR and in
// DAG-JSON, each file named by its CID.
type fixture struct {
	name             string
	cborCID, jsonCID string
	cbor, json       []byte
}

func loadFixtures(tb testing.TB) []fixture {
	tb.Helper()
	dirs, err := os.ReadDir(filepath.Join("testdata", "ipld-codec"))
	if err != nil {
		tb.Fatal(err)
	}
	var out []fixture
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		fx := fixture{name: d.Name()}
		dir := filepath.Join("testdata", "ipld-codec", d.Name())
		files, err := os.ReadDir(dir)
		if err != nil {
			tb.Fatal(err)
		}
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join(dir, f.Name()))
			if err != nil {
				tb.Fatal(err)
			}
			switch ext := filepath.Ext(f.Name()); ext {
			case ".dag-cbor":
				fx.cborCID, fx.cbor = strings.TrimSuffix(f.Name(), ext), data
			case ".dag-json":
				fx.jsonCID, fx.json = strings.TrimSuffix(f.Name(), ext), data
			default:
				tb.Fatalf("%s: unexpected file %s", d.Name(), f.Name())
			}
		}
		if fx.cbor == nil || fx.json == nil {
			tb.Fatalf("%s: want one .dag-cbor and one .dag-json file", d.Name())
		}
		out = append(out, fx)
	}
	if len(out) == 0 {
		tb.Fatal("no fixtures")
	}
	return out
}

func TestIPLDCodecFixtures(t *testing.T) {
	fixtures := loadFixtures(t)
	if len(fixtures) != 43 {
		t.Errorf("%d fixture folders, want 43", len(fixtures))
	}
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			// (a) DAG-JSON -> data model -> DAG-CBOR gives the fixture's
			// bytes, which hash to the .dag-cbor file's name.
			v, err := cas.DecodeJSON(fx.json)
			if err != nil {
				t.Fatalf("DecodeJSON: %v", err)
			}
			b, err := cas.EncodeNode(v)
			if err != nil {
				t.Fatalf("EncodeNode: %v", err)
			}
			if got := cas.Sum(cas.DagCBOR, b).String(); got != fx.cborCID {
				t.Errorf("CID of EncodeNode(DecodeJSON) = %s, want %s", got, fx.cborCID)
			}
			if !bytes.Equal(b, fx.cbor) {
				t.Errorf("EncodeNode(DecodeJSON) =\n%x\nwant\n%x", b, fx.cbor)
			}

			// (b) DAG-CBOR -> data model -> DAG-JSON gives the fixture's
			// bytes.
			n, err := cas.DecodeNode(fx.cbor)
			if err != nil {
				t.Fatalf("DecodeNode: %v", err)
			}
			j, err := cas.EncodeJSON(n)
			if err != nil {
				t.Fatalf("EncodeJSON: %v", err)
			}
			if !bytes.Equal(j, fx.json) {
				t.Errorf("EncodeJSON(DecodeNode) =\n%s\nwant\n%s", j, fx.json)
			}

			// (c) Both files hash to their names.
			if got := cas.Sum(cas.DagJSON, fx.json).String(); got != fx.jsonCID {
				t.Errorf("CID of the .dag-json file = %s, want %s", got, fx.jsonCID)
			}
			if got := cas.Sum(0x0129, fx.json).String(); got != fx.jsonCID {
				t.Errorf("CID of the .dag-json file under 0x0129 = %s, want %s", got, fx.jsonCID)
			}
			if got := cas.Sum(cas.DagCBOR, fx.cbor).String(); got != fx.cborCID {
				t.Errorf("CID of the .dag-cbor file = %s, want %s", got, fx.cborCID)
			}

			// The two decodes agree, and the indented form reads back.
			if !reflect.DeepEqual(normalize(v), normalize(n)) {
				t.Errorf("DecodeJSON = %#v, DecodeNode = %#v", v, n)
			}
			ind, err := cas.EncodeJSONIndent(n, "  ")
			if err != nil {
				t.Fatalf("EncodeJSONIndent: %v", err)
			}
			w, err := cas.DecodeJSON(ind)
			if err != nil {
				t.Fatalf("DecodeJSON(EncodeJSONIndent): %v\n%s", err, ind)
			}
			if b2, err := cas.EncodeNode(w); err != nil || !bytes.Equal(b2, fx.cbor) {
				t.Errorf("indented form does not read back: %v\n%s", err, ind)
			}
		})
	}
}

// normalize makes data model values comparable with reflect.DeepEqual:
// CIDs become their strings and big integers their decimal form.
func normalize(v any) any {
	switch x := v.(type) {
	case cid.Cid:
		return "cid:" + x.String()
	case *big.Int:
		return "big:" + x.String()
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	}
	return v
}

func mustCID(t testing.TB, s string) cid.Cid {
	t.Helper()
	c, err := cas.ParseCID(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func bigInt(s string) *big.Int {
	b, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic(s)
	}
	return b
}

func TestDecodeJSONValues(t *testing.T) {
	v1 := "bafyreidykglsfhoixmivffc5uwhcgshx4j465xwqntbmu43nb2dzqwfvae"
	v0 := "QmXg9Pp2ytZ14xgmQjYEiHjVjMFXzCVVEcRTWJBmLgR39V"
	tests := []struct {
		in   string
		want any
	}{
		{`null`, nil},
		{` true `, true},
		{"\t\r\nfalse\n", false},
		{`0`, int64(0)},
		{`-0`, int64(0)},
		{`9223372036854775807`, int64(math.MaxInt64)},
		{`-9223372036854775808`, int64(math.MinInt64)},
		{`9223372036854775808`, bigInt("9223372036854775808")},
		{`18446744073709551615`, bigInt("18446744073709551615")},
		{`-9223372036854775809`, bigInt("-9223372036854775809")},
		{`-18446744073709551616`, bigInt("-18446744073709551616")},
		{`1.0`, 1.0},
		{`-0.0`, math.Copysign(0, -1)},
		{`1e2`, 100.0},
		{`1E+2`, 100.0},
		{`2.5e-3`, 0.0025},
		{`0e-400`, 0.0},    // zero, however written
		{`5e-324`, 5e-324}, // the smallest float64 above zero
		{`1.7976931348623157e308`, math.MaxFloat64},
		{`""`, ""},
		{`"a\"b\\c\/d\b\f\n\r\t"`, "a\"b\\c/d\b\f\n\r\t"},
		{`"\u0000\u001f\u00e9\u20AC"`, "\x00\x1f\u00e9\u20ac"},
		{`"\ud83d\ude00"`, "\U0001F600"},
		{`"Čaues ßvěte!"`, "Čaues ßvěte!"},
		{`"<>&\u2028"`, "<>&\u2028"},
		{`[]`, []any{}},
		{`[1, [2, []], "x"]`, []any{int64(1), []any{int64(2), []any{}}, "x"}},
		{`{}`, map[string]any{}},
		{`{"b":1,"a":{"c":null}}`, map[string]any{"a": map[string]any{"c": nil}, "b": int64(1)}},
		{`{"/":"` + v1 + `"}`, "cid:" + v1},
		{` { "/" : "` + v0 + `" } `, "cid:" + v0},
		{`{"/":{"bytes":""}}`, []byte{}},
		{`{"/":{"bytes":"AAEC/w"}}`, []byte{0, 1, 2, 0xff}},
		{`[{"/":{"bytes":"YTE"}}]`, []any{[]byte("a1")}},
		// Not in the reserved namespace: ordinary maps.
		{`{"/":true}`, map[string]any{"/": true}},
		{`{"/":1,"a":2}`, map[string]any{"/": int64(1), "a": int64(2)}},
		{`{"/":{"bytes":true}}`, map[string]any{"/": map[string]any{"bytes": true}}},
		{`{"/":{"bytes":1},"bar":"baz"}`, map[string]any{"/": map[string]any{"bytes": int64(1)}, "bar": "baz"}},
		{`{"/":{"abar":"baz","bytes":"foo"}}`, map[string]any{"/": map[string]any{"abar": "baz", "bytes": "foo"}}},
		{`{"0bar":"baz","/":{}}`, map[string]any{"0bar": "baz", "/": map[string]any{}}},
		{`{"":"baz","/":"foo"}`, map[string]any{"": "baz", "/": "foo"}}, // "" sorts before "/"
		{`{"/":{"bar":"baz","bytes":"foo"}}`, map[string]any{"/": map[string]any{"bar": "baz", "bytes": "foo"}}},
		{`{"/":{"/":"` + v1 + `"}}`, map[string]any{"/": "cid:" + v1}},
		{`{"/":{"/":{"bytes":"AA"}}}`, map[string]any{"/": []byte{0}}},
	}
	for _, tt := range tests {
		got, err := cas.DecodeJSON([]byte(tt.in))
		if err != nil {
			t.Errorf("DecodeJSON(%s): %v", tt.in, err)
			continue
		}
		if f, ok := tt.want.(float64); ok {
			g, ok := got.(float64)
			if !ok || math.Float64bits(g) != math.Float64bits(f) {
				t.Errorf("DecodeJSON(%s) = %#v, want %#v", tt.in, got, tt.want)
			}
			continue
		}
		if !reflect.DeepEqual(normalize(got), normalize(tt.want)) {
			t.Errorf("DecodeJSON(%s) = %#v, want %#v", tt.in, got, tt.want)
		}
	}
}

func TestDecodeJSONRefuses(t *testing.T) {
	v1 := "bafyreidykglsfhoixmivffc5uwhcgshx4j465xwqntbmu43nb2dzqwfvae"
	tests := []struct {
		in     string
		offset int // -1: don't check
	}{
		{``, 0},
		{`   `, 3},
		{`1 2`, 2},
		{`{} x`, 3},
		{`nul`, 0},
		{`True`, 0},
		{`NaN`, 0},
		{`Infinity`, 0},
		{`-Infinity`, 0},
		{`+1`, 0},
		{`01`, 1},
		{`-`, 0},
		{`1.`, 0},
		{`.5`, 0},
		{`1e`, 0},
		{`1e+`, 0},
		{`0x10`, 1},
		{`1e400`, 0},
		{`-1e400`, 0},
		{`1e-400`, 0}, // would read as 0: refused as 1e400 is
		{`-2e-330`, 0},
		{`18446744073709551616`, 0},
		{`-18446744073709551617`, 0},
		{`100000000000000000000000000000`, 0},
		{`"abc`, 0},
		{`"a` + "\n" + `"`, 2},
		{`"a` + "\x7f\xff" + `"`, 3},
		{"\"\xc3\x28\"", 1},
		{"\"\xed\xa0\x80\"", 1}, // a surrogate encoded in UTF-8
		{`"\x"`, 1},
		{`"\u12"`, 1},
		{`"\ud800"`, 1},
		{`"\ud800x"`, 1},
		{`"\udc00"`, 1},
		{`"\ud800\u0041"`, 1},
		{`"\`, 1},
		{`[1,]`, 3},
		{`[1 2]`, 3},
		{`[`, 1},
		{`{"a"}`, 4},
		{`{"a":1,}`, 7},
		{`{a:1}`, 1},
		{`{"a":1 "b":2}`, 7},
		{`{"a":1,"a":2}`, 7},
		{`{"a":1,"\u0061":2}`, 7},
		{"\xef\xbb\xbf1", 0}, // a byte order mark
		// The reserved namespace.
		{`{"/":"not a cid"}`, 5},
		{`{"/":""}`, 5},
		{`{"/":"` + v1 + `","a":1}`, 0},
		{`{"a":1,"/":"` + v1 + `"}`, 0},
		{`{"/":"x","bar":"baz"}`, 0},
		{`{"/":{"bytes":"foo","bar":"baz"}}`, 0},
		{`{"/":{"bytes":"foo"},"bar":"baz"}`, 0},
		{`{"/":"foo","":"baz"}`, 0},       // "/" first as written
		{`{"a":1,"/":"foo"}`, 0},          // "/" first in bytewise order
		{`{"/":{"c":1,"bytes":"AA"}}`, 0}, // "bytes" first in bytewise order
		{`{"/":{"bytes":"AA","a":1}}`, 0}, // "bytes" first as written
		{`{"/":{"bytes":"AA"},"":1}`, 0},
		{`{"/":{"bytes":"AA=="}}`, 5},
		{`{"/":{"bytes":"AB"}}`, 5}, // non-zero trailing bits
		{`{"/":{"bytes":"A"}}`, 5},
		{`{"/":{"bytes":"A\nA"}}`, 5},
		{`{"/":{"bytes":"-_8"}}`, 5}, // URL alphabet
		{`{"/":{"bytes":"mAAEC"}}`, 5},
	}
	for _, tt := range tests {
		v, err := cas.DecodeJSON([]byte(tt.in))
		if err == nil {
			t.Errorf("DecodeJSON(%q) = %#v, want an error", tt.in, v)
			continue
		}
		if !errors.Is(err, cas.ErrInvalid) {
			t.Errorf("DecodeJSON(%q): %v does not wrap ErrInvalid", tt.in, err)
		}
		var je *cas.JSONError
		if !errors.As(err, &je) {
			t.Errorf("DecodeJSON(%q): %v is not a *JSONError", tt.in, err)
			continue
		}
		if tt.offset >= 0 && je.Offset != tt.offset {
			t.Errorf("DecodeJSON(%q): offset %d, want %d (%v)", tt.in, je.Offset, tt.offset, err)
		}
	}

	_, err := cas.DecodeJSON([]byte(`[{"/":"bafyfoo"}]`))
	if !errors.Is(err, cas.ErrBadCID) || !errors.Is(err, cas.ErrInvalid) {
		t.Errorf("bad link: %v, want ErrBadCID and ErrInvalid", err)
	}
}

func nestJSON(n int, inner string) string {
	return strings.Repeat("[", n) + inner + strings.Repeat("]", n)
}

func nestMapJSON(n int, inner string) string {
	return strings.Repeat(`{"a":`, n) + inner + strings.Repeat("}", n)
}

func nestNode(n int, inner any) any {
	v := inner
	for range n {
		v = []any{v}
	}
	return v
}

// TestDepth checks that DecodeJSON, EncodeJSON, EncodeNode and DecodeNode
// all accept 512 nested arrays or maps and refuse 513.
func TestDepth(t *testing.T) {
	const link = `{"/":"bafyreidykglsfhoixmivffc5uwhcgshx4j465xwqntbmu43nb2dzqwfvae"}`
	const byts = `{"/":{"bytes":"AAE"}}`
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{nestJSON(512, ""), true},
		{nestJSON(512, "1"), true},
		{nestJSON(512, link), true},
		{nestJSON(512, byts), true},
		{nestJSON(511, "{}"), true},
		{nestJSON(511, `{"/":{"bytes":1}}`), false},
		{nestJSON(511, `{"/":{"a":"b"}}`), false},
		{nestJSON(511, `{"/":{"bytes":"AA","x":1}}`), false},
		{nestJSON(511, `{"/":{"bytes":{}}}`), false},
		{nestJSON(511, `{"/":{"bytes":"AA"},"x":{}}`), false},
		{nestJSON(512, "{}"), false},
		{nestJSON(511, `{"/":{}}`), false},
		{nestJSON(511, `{"/":[]}`), false},
		{nestJSON(511, `{"/":{"/":{"x":1}}}`), false},
		{nestJSON(510, `{"/":{"/":{"x":1}}}`), false},
		{nestJSON(509, `{"/":{"/":{"x":1}}}`), true},
		{nestJSON(510, `{"/":{"/":{"bytes":"AA"}}}`), true},
		{nestJSON(511, `{"/":{"/":{"bytes":"AA"}}}`), true},
		{nestJSON(512, `{"/":{"/":{"bytes":"AA"}}}`), false},
		{nestJSON(511, `{"/":{"/":"bafkqabiaaebagba"}}`), true},
		{nestJSON(512, `{"/":{"/":"bafkqabiaaebagba"}}`), false},
		{nestJSON(513, ""), false},
		{nestMapJSON(511, `{}`), true},
		{nestMapJSON(511, byts), true},
		{nestMapJSON(512, `{}`), false},
		{nestMapJSON(512, `1`), true},
		{nestJSON(100000, ""), false},
		{nestMapJSON(100000, "1"), false},
		{strings.Repeat(`{"/":`, 100000), false},
	} {
		v, err := cas.DecodeJSON([]byte(tt.in))
		if (err == nil) != tt.ok {
			t.Errorf("DecodeJSON(%.40s…%d bytes): err = %v, want ok = %v", tt.in, len(tt.in), err, tt.ok)
			continue
		}
		if err != nil {
			continue
		}
		b, err := cas.EncodeNode(v)
		if err != nil {
			t.Errorf("EncodeNode(DecodeJSON(%.40s…)): %v", tt.in, err)
			continue
		}
		if _, err := cas.DecodeNode(b); err != nil {
			t.Errorf("DecodeNode(EncodeNode(DecodeJSON(%.40s…))): %v", tt.in, err)
		}
		if _, err := cas.EncodeJSON(v); err != nil {
			t.Errorf("EncodeJSON(DecodeJSON(%.40s…)): %v", tt.in, err)
		}
	}
	// What EncodeNode refuses, EncodeJSON refuses too.
	for _, n := range []int{513, 514} {
		v := nestNode(n, []any{})
		if _, err := cas.EncodeNode(nestNode(n-1, []any{})); err == nil && n == 514 {
			t.Errorf("EncodeNode accepted %d nested arrays", n-1)
		}
		if _, err := cas.EncodeNode(v); !errors.Is(err, cas.ErrInvalid) {
			t.Errorf("EncodeNode(%d nested arrays): %v, want ErrInvalid", n, err)
		}
		if _, err := cas.EncodeJSON(v); !errors.Is(err, cas.ErrInvalid) {
			t.Errorf("EncodeJSON(%d nested arrays): %v, want ErrInvalid", n, err)
		}
	}
	if _, err := cas.EncodeNode(nestNode(511, []any{})); err != nil {
		t.Errorf("EncodeNode(512 nested arrays): %v", err)
	}
}

func TestEncodeJSON(t *testing.T) {
	c := mustCID(t, "bafyreidykglsfhoixmivffc5uwhcgshx4j465xwqntbmu43nb2dzqwfvae")
	v0 := mustCID(t, "QmXg9Pp2ytZ14xgmQjYEiHjVjMFXzCVVEcRTWJBmLgR39V")
	tests := []struct {
		in   any
		want string
	}{
		{nil, `null`},
		{true, `true`},
		{int64(-5), `-5`},
		{uint64(math.MaxUint64), `18446744073709551615`},
		{int8(-128), `-128`},
		{bigInt("-18446744073709551616"), `-18446744073709551616`},
		{1.0, `1.0`},
		{-1.5, `-1.5`},
		{0.0, `0.0`},
		{math.Copysign(0, -1), `-0.0`},
		{0.1, `0.1`},
		{1e20, `100000000000000000000.0`},
		{1e21, `1e+21`},
		{1.5e300, `1.5e+300`},
		{1e-6, `0.000001`},
		{1e-7, `1e-7`},
		{1.25e-10, `1.25e-10`},
		{5e-324, `5e-324`},
		{math.MaxFloat64, `1.7976931348623157e+308`},
		{"", `""`},
		{"a\"b\\c/d", `"a\"b\\c/d"`},
		{"\b\f\n\r\t\x00\x01\x1f\x7f", `"\b\f\n\r\t\u0000\u0001\u001f` + "\x7f" + `"`},
		{"<>&\u2028\u2029é€😀", "\"<>&\u2028\u2029é€😀\""},
		{[]byte{}, `{"/":{"bytes":""}}`},
		{[]byte(nil), `{"/":{"bytes":""}}`},
		{[]byte{0, 1, 2, 0xff}, `{"/":{"bytes":"AAEC/w"}}`},
		{c, `{"/":"bafyreidykglsfhoixmivffc5uwhcgshx4j465xwqntbmu43nb2dzqwfvae"}`},
		{cas.Link{Cid: v0}, `{"/":"QmXg9Pp2ytZ14xgmQjYEiHjVjMFXzCVVEcRTWJBmLgR39V"}`},
		{[]any(nil), `[]`},
		{map[string]any(nil), `{}`},
		{[]any{int64(1), "x", []any{}}, `[1,"x",[]]`},
		// Bytewise key order, not DAG-CBOR's length-first order.
		{map[string]any{"b": 1, "aa": 2, "a": 3, "é": 4, "Z": 5, "": 6}, `{"":6,"Z":5,"a":3,"aa":2,"b":1,"é":4}`},
		{map[string]any{"/": true}, `{"/":true}`},
		{map[string]any{"/": map[string]any{"bytes": []byte{1}}}, `{"/":{"bytes":{"/":{"bytes":"AQ"}}}}`},
		{map[string]any{"/": map[string]any{"abar": "baz", "bytes": "foo"}}, `{"/":{"abar":"baz","bytes":"foo"}}`},
		{map[string]any{"": "baz", "/": "foo"}, `{"":"baz","/":"foo"}`},
		{map[string]any{"/": c}, `{"/":{"/":"bafyreidykglsfhoixmivffc5uwhcgshx4j465xwqntbmu43nb2dzqwfvae"}}`},
	}
	for _, tt := range tests {
		got, err := cas.EncodeJSON(tt.in)
		if err != nil {
			t.Errorf("EncodeJSON(%#v): %v", tt.in, err)
			continue
		}
		if string(got) != tt.want {
			t.Errorf("EncodeJSON(%#v) = %s, want %s", tt.in, got, tt.want)
		}
		// It reads back to the same DAG-CBOR.
		back, err := cas.DecodeJSON(got)
		if err != nil {
			t.Errorf("DecodeJSON(%s): %v", got, err)
			continue
		}
		b1, err1 := cas.EncodeNode(tt.in)
		b2, err2 := cas.EncodeNode(back)
		if err1 != nil || err2 != nil || !bytes.Equal(b1, b2) {
			t.Errorf("%s: EncodeNode differs after a round trip: %x %v / %x %v", got, b1, err1, b2, err2)
		}
	}
}

func TestEncodeJSONRefuses(t *testing.T) {
	c := mustCID(t, "bafyreidykglsfhoixmivffc5uwhcgshx4j465xwqntbmu43nb2dzqwfvae")
	for _, in := range []any{
		math.NaN(),
		math.Inf(1),
		math.Inf(-1),
		float32(1),
		"\xff",
		map[string]any{"\xff": 1},
		bigInt("18446744073709551616"),
		bigInt("-18446744073709551617"),
		cid.Undef,
		cas.Link{},
		struct{}{},
		map[string]string{"a": "b"},
		[]string{"a"},
		map[string]any{"/": "x"},
		map[string]any{"/": c.String()},
		map[string]any{"/": "x", "a": 1},
		map[string]any{"/": map[string]any{"bytes": "AA"}},
		map[string]any{"/": map[string]any{"bytes": "AA", "c": 1}},
		map[string]any{"/": map[string]any{"bytes": "AA"}, "a": 1},
		[]any{map[string]any{"x": map[string]any{"/": "y"}}},
	} {
		if got, err := cas.EncodeJSON(in); err == nil {
			t.Errorf("EncodeJSON(%#v) = %s, want an error", in, got)
		} else if !errors.Is(err, cas.ErrInvalid) {
			t.Errorf("EncodeJSON(%#v): %v does not wrap ErrInvalid", in, err)
		}
	}
}

func TestEncodeJSONIndent(t *testing.T) {
	c := mustCID(t, "bafkqabiaaebagba")
	v := map[string]any{
		"name":  "hg",
		"data":  []byte("hi"),
		"links": []any{c, c},
		"empty": []any{},
		"meta":  map[string]any{},
		"n":     map[string]any{"x": int64(1)},
	}
	got, err := cas.EncodeJSONIndent(v, "  ")
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "data": {"/":{"bytes":"aGk"}},
  "empty": [],
  "links": [
    {"/":"bafkqabiaaebagba"},
    {"/":"bafkqabiaaebagba"}
  ],
  "meta": {},
  "n": {
    "x": 1
  },
  "name": "hg"
}`
	if string(got) != want {
		t.Errorf("EncodeJSONIndent =\n%s\nwant\n%s", got, want)
	}
	back, err := cas.DecodeJSON(got)
	if err != nil {
		t.Fatal(err)
	}
	compact, _ := cas.EncodeJSON(v)
	again, _ := cas.EncodeJSON(back)
	if !bytes.Equal(compact, again) {
		t.Errorf("indented form reads back as %s, want %s", again, compact)
	}
	if s, _ := cas.EncodeJSONIndent(int64(1), "\t"); string(s) != "1" {
		t.Errorf("EncodeJSONIndent(1) = %q", s)
	}
}

// TestJSONToCBOR checks a few DAG-JSON documents against DAG-CBOR written
// out by hand.
func TestJSONToCBOR(t *testing.T) {
	for _, tt := range []struct{ json, cbor string }{
		{`{"b":1,"aa":2,"a":3}`, "a3" + "6161" + "03" + "6162" + "01" + "626161" + "02"},
		{`[1.5, -0.0, 1.0]`, "83" + "fb3ff8000000000000" + "fb8000000000000000" + "fb3ff0000000000000"},
		{`18446744073709551615`, "1bffffffffffffffff"},
		{`-18446744073709551616`, "3bffffffffffffffff"},
		{`{"/":{"bytes":"AQ"}}`, "4101"},
		{`{"/":"bafkqabiaaebagba"}`, "d82a" + "4a" + "00" + "015500" + "05" + "0001020304"}, // identity multihash
	} {
		v, err := cas.DecodeJSON([]byte(tt.json))
		if err != nil {
			t.Errorf("DecodeJSON(%s): %v", tt.json, err)
			continue
		}
		b, err := cas.EncodeNode(v)
		if err != nil {
			t.Errorf("EncodeNode(%s): %v", tt.json, err)
			continue
		}
		if got := hex.EncodeToString(b); got != tt.cbor {
			t.Errorf("%s: DAG-CBOR %s, want %s", tt.json, got, tt.cbor)
		}
	}
}

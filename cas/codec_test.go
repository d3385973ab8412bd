package cas_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// unhex decodes hex written with spaces for readability.
func unhex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		tb.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// testCID is the CID of a raw block, and testCIDHex its binary form.
var (
	testCID    = cas.Sum(cas.Raw, []byte("hg"))
	testCIDHex = hex.EncodeToString(testCID.Bytes()) // 36 bytes
)

// TestDecodeNodeRefuses checks that the strict decoder refuses every
// non-canonical or non-DAG-CBOR form, and accepts the canonical form of
// the same value where there is one.
func TestDecodeNodeRefuses(t *testing.T) {
	tests := []struct {
		name string
		bad  string // refused with ErrNotCanonical
		good string // the canonical form of the same value, or ""
	}{
		// Map key order is length first, then bytewise.
		{"unsorted keys", "a2 6162 01 6161 02", "a2 6161 02 6162 01"},
		{"bytewise, not length-first order", "a2 626161 01 6162 02", "a2 6162 02 626161 01"},
		{"three keys out of order", "a3 6161 01 626262 03 6162 02", "a3 6161 01 6162 02 626262 03"},
		{"duplicate keys", "a2 6161 01 6161 02", "a1 6161 02"},
		{"duplicate keys, same value", "a2 6161 01 6161 01", "a1 6161 01"},
		// Integers and lengths use the shortest head.
		{"int 1 in one extra byte", "18 01", "01"},
		{"int 1 in two bytes", "19 0001", "01"},
		{"int 1 in four bytes", "1a 00000001", "01"},
		{"int 1 in eight bytes", "1b 0000000000000001", "01"},
		{"int 255 in two bytes", "19 00ff", "18 ff"},
		{"int 65535 in four bytes", "1a 0000ffff", "19 ffff"},
		{"int 2^32-1 in eight bytes", "1b 00000000ffffffff", "1a ffffffff"},
		{"int -1 in one extra byte", "38 00", "20"},
		{"int -256 in four bytes", "3a 000000ff", "38 ff"},
		{"string length in one extra byte", "78 01 61", "61 61"},
		{"string length in two bytes", "79 0001 61", "61 61"},
		{"bytes length in one extra byte", "58 01 ff", "41 ff"},
		{"array length in one extra byte", "98 01 01", "81 01"},
		{"map length in one extra byte", "b8 01 6161 01", "a1 6161 01"},
		{"tag 42 in two bytes", "d9 002a 58 25 00" + testCIDHex, "d8 2a 58 25 00" + testCIDHex},
		// Floats are 64-bit, finite numbers.
		{"float16 1.0", "f9 3c00", "fb 3ff0000000000000"},
		{"float16 0.0", "f9 0000", "fb 0000000000000000"},
		{"float32 1.0", "fa 3f800000", "fb 3ff0000000000000"},
		{"float32 1.5", "fa 3fc00000", "fb 3ff8000000000000"},
		{"NaN", "fb 7ff8000000000000", ""},
		{"NaN with payload", "fb 7ff8000000000001", ""},
		{"float16 NaN", "f9 7e00", ""},
		{"float32 NaN", "fa 7fc00000", ""},
		{"+Inf", "fb 7ff0000000000000", ""},
		{"-Inf", "fb fff0000000000000", ""},
		{"float16 +Inf", "f9 7c00", ""},
		// Lengths are definite.
		{"indefinite array", "9f 01 ff", "81 01"},
		{"indefinite empty array", "9f ff", "80"},
		{"indefinite map", "bf 6161 01 ff", "a1 6161 01"},
		{"indefinite text string", "7f 61 61 ff", "61 61"},
		{"indefinite byte string", "5f 41 ff ff", "41 ff"},
		{"lone break", "ff", ""},
		// Only tag 42 is allowed, over 0x00 and a binary CID.
		{"tag 0 (date string)", "c0 74 323031332d30332d32315432303a30343a30305a", ""},
		{"tag 1 (epoch)", "c1 01", ""},
		{"tag 2 (bignum)", "c2 41 01", ""},
		{"tag 3 (negative bignum)", "c3 41 01", ""},
		{"tag 43", "d8 2b 58 25 00" + testCIDHex, ""},
		{"tag 55799 (self-described CBOR)", "d9 d9f7 01", "01"},
		{"tag 42 inside tag 43", "d8 2b d8 2a 58 25 00" + testCIDHex, ""},
		{"tag 42 without the 0x00 prefix", "d8 2a 58 24" + testCIDHex, "d8 2a 58 25 00" + testCIDHex},
		{"tag 42 with another prefix", "d8 2a 58 25 01" + testCIDHex, ""},
		{"tag 42 over a text string", "d8 2a 78 3b" + hex.EncodeToString([]byte(testCID.String())), ""},
		{"tag 42 over an int", "d8 2a 01", ""},
		{"tag 42 over an array", "d8 2a 81 58 25 00" + testCIDHex, ""},
		{"tag 42 over empty bytes", "d8 2a 40", ""},
		{"tag 42 over a bare 0x00", "d8 2a 41 00", ""},
		{"tag 42 over a truncated CID", "d8 2a 58 24 00" + testCIDHex[:70], ""},
		{"tag 42 over a CID with extra bytes", "d8 2a 58 26 00" + testCIDHex + "00", ""},
		{"tag 42 over tag 42", "d8 2a d8 2a 58 25 00" + testCIDHex, ""},
		// Map keys are strings.
		{"int map key", "a1 01 01", ""},
		{"bytes map key", "a1 41 61 01", ""},
		{"null map key", "a1 f6 01", ""},
		{"array map key", "a1 80 01", ""},
		{"int key after a string key", "a2 6161 01 01 01", ""},
		// Strings are UTF-8.
		{"invalid UTF-8", "62 c328", ""},
		{"UTF-8 surrogate", "63 eda080", ""},
		{"overlong UTF-8", "62 c0af", ""},
		{"invalid UTF-8 map key", "a1 62c328 01", ""},
		{"invalid UTF-8 in an array", "82 01 61 ff", ""},
		// Exactly one item.
		{"trailing byte", "01 01", "01"},
		{"trailing item after a map", "a0 a0", "a0"},
		{"trailing zero", "f6 00", "f6"},
		{"empty input", "", ""},
		{"truncated string", "62 61", ""},
		{"truncated array", "82 01", ""},
		{"truncated map", "a1 6161", ""},
		{"truncated head", "19 01", ""},
		{"truncated tag", "d8 2a", ""},
		{"reserved additional info", "1c", ""},
		// Only false, true and null among the simple values.
		{"undefined", "f7", "f6"},
		{"simple value 0", "e0", ""},
		{"simple value 16", "f0", ""},
		{"simple value 19", "f3", ""},
		{"simple value 32", "f8 20", ""},
		{"simple value 255", "f8 ff", ""},
		{"simple value 20 in two bytes", "f8 14", "f4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := unhex(t, tt.bad)
			v, err := cas.DecodeNode(bad)
			if err == nil {
				t.Fatalf("DecodeNode(%x) = %#v, want an error", bad, v)
			}
			if !errors.Is(err, cas.ErrNotCanonical) {
				t.Errorf("DecodeNode(%x): %v does not wrap ErrNotCanonical", bad, err)
			}
			if tt.good == "" {
				return
			}
			good := unhex(t, tt.good)
			v, err = cas.DecodeNode(good)
			if err != nil {
				t.Fatalf("DecodeNode(%x): %v", good, err)
			}
			again, err := cas.EncodeNode(v)
			if err != nil || !bytes.Equal(again, good) {
				t.Errorf("EncodeNode(DecodeNode(%x)) = %x, %v", good, again, err)
			}
		})
	}
}

// TestDecodeNodeAccepts checks canonical DAG-CBOR against the value it
// holds.
func TestDecodeNodeAccepts(t *testing.T) {
	maxU := new(big.Int).SetUint64(1<<64 - 1)
	minN := new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 64))
	tests := []struct {
		hex  string
		want any
	}{
		{"f6", nil},
		{"f4", false},
		{"f5", true},
		{"00", int64(0)},
		{"17", int64(23)},
		{"18 18", int64(24)},
		{"20", int64(-1)},
		{"37", int64(-24)},
		{"38 18", int64(-25)},
		{"1b 7fffffffffffffff", int64(1<<63 - 1)},
		{"3b 7fffffffffffffff", int64(-1 << 63)},
		{"1b 8000000000000000", new(big.Int).Lsh(big.NewInt(1), 63)},
		{"1b ffffffffffffffff", maxU},
		{"3b ffffffffffffffff", minN},
		{"fb 3ff8000000000000", 1.5},
		{"fb 8000000000000000", math.Copysign(0, -1)},
		{"60", ""},
		{"65 68656c6c6f", "hello"},
		{"40", []byte{}},
		{"43 000102", []byte{0, 1, 2}},
		{"80", []any{}},
		{"82 01 82 02 03", []any{int64(1), []any{int64(2), int64(3)}}},
		{"a0", map[string]any{}},
		{"a3 6161 01 6162 02 626161 03", map[string]any{"a": int64(1), "b": int64(2), "aa": int64(3)}},
		{"d8 2a 58 25 00" + testCIDHex, testCID},
	}
	for _, tt := range tests {
		data := unhex(t, tt.hex)
		v, err := cas.DecodeNode(data)
		if err != nil {
			t.Errorf("DecodeNode(%s): %v", tt.hex, err)
			continue
		}
		if !reflect.DeepEqual(normalize(v), normalize(tt.want)) {
			t.Errorf("DecodeNode(%s) = %#v, want %#v", tt.hex, v, tt.want)
		}
		again, err := cas.EncodeNode(tt.want)
		if err != nil || !bytes.Equal(again, data) {
			t.Errorf("EncodeNode(%#v) = %x, %v; want %s", tt.want, again, err, tt.hex)
		}
	}
}

func TestEncodeNodeRefuses(t *testing.T) {
	for _, in := range []any{
		float32(1.5),
		1.0 / zero(),
		"\xff",
		map[string]any{"\xff": 1},
		new(big.Int).Lsh(big.NewInt(1), 64),
		cid.Undef,
		map[string]int{"a": 1},
		[]int{1},
		struct{}{},
	} {
		if b, err := cas.EncodeNode(in); err == nil {
			t.Errorf("EncodeNode(%#v) = %x, want an error", in, b)
		} else if !errors.Is(err, cas.ErrInvalid) {
			t.Errorf("EncodeNode(%#v): %v does not wrap ErrInvalid", in, err)
		}
	}
}

func zero() float64 { return 0 }

// testObject is a typed hg object of the kind Marshal and Unmarshal are for.
type testObject struct {
	Name  string     `cbor:"name"`
	Size  uint64     `cbor:"size"`
	Link  cas.Link   `cbor:"link"`
	Links []cas.Link `cbor:"links"`
}

// pair returns the DAG-CBOR of one map entry, to assemble maps by hand.
func pair(t *testing.T, k string, v any) []byte {
	t.Helper()
	b, err := cas.EncodeNode(map[string]any{k: v})
	if err != nil {
		t.Fatal(err)
	}
	return b[1:]
}

func TestTypedRoundTrip(t *testing.T) {
	other := cas.Sum(cas.DagCBOR, []byte{0xa0})
	obj := testObject{
		Name:  "hg",
		Size:  1 << 40,
		Link:  cas.Link{Cid: testCID},
		Links: []cas.Link{{Cid: other}, {Cid: testCID}},
	}
	data, err := cas.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var back testObject
	if err := cas.Unmarshal(data, &back); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if !reflect.DeepEqual(back, obj) {
		t.Errorf("round trip: %+v, want %+v", back, obj)
	}

	// Struct fields come out in the canonical order, as EncodeNode writes
	// the same map, and DecodeNode reads the links as CIDs.
	node := map[string]any{
		"name":  "hg",
		"size":  uint64(1 << 40),
		"link":  testCID,
		"links": []any{other, testCID},
	}
	want, err := cas.EncodeNode(node)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, want) {
		t.Errorf("Marshal =\n%x\nEncodeNode of the same map =\n%x", data, want)
	}
	// Length first: link, name, size (4 bytes) before links (5 bytes).
	hdr := "a4 646c696e6b d82a5825"
	if !strings.HasPrefix(hex.EncodeToString(data), strings.ReplaceAll(hdr, " ", "")) {
		t.Errorf("Marshal = %x, want it to start with %s", data, hdr)
	}
	n, err := cas.DecodeNode(data)
	if err != nil {
		t.Fatalf("DecodeNode(Marshal): %v", err)
	}
	if l, _ := n.(map[string]any)["link"].(cid.Cid); !l.Equals(testCID) {
		t.Errorf("DecodeNode(Marshal)[link] = %#v", n.(map[string]any)["link"])
	}
}

func TestTypedUnmarshalRefuses(t *testing.T) {
	link := pair(t, "link", testCID)
	name := pair(t, "name", "hg")
	size := pair(t, "size", int64(7))
	links := pair(t, "links", []any{testCID})
	canonical := cat(unhex(t, "a4"), link, name, size, links)
	var ok testObject
	if err := cas.Unmarshal(canonical, &ok); err != nil {
		t.Fatalf("canonical form refused: %v", err)
	}
	if ok.Size != 7 || ok.Name != "hg" || !ok.Link.Equals(testCID) || len(ok.Links) != 1 {
		t.Fatalf("Unmarshal = %+v", ok)
	}

	badLink := pair(t, "link", []byte{1, 2})
	tests := []struct {
		name string
		data []byte
	}{
		{"bytewise key order", cat(unhex(t, "a4"), link, links, name, size)},
		{"unsorted keys", cat(unhex(t, "a4"), name, link, size, links)},
		{"unknown field", cat(unhex(t, "a5"), link, name, size, links, pair(t, "extra", int64(1)))},
		{"missing field", cat(unhex(t, "a3"), link, name, links)},
		{"duplicate field", cat(unhex(t, "a5"), link, name, name, size, links)},
		{"non-shortest integer", cat(unhex(t, "a4"), link, name, unhex(t, "6473697a65 1807"), links)},
		{"trailing bytes", cat(canonical, unhex(t, "00"))},
		{"link as bytes", cat(unhex(t, "a4"), badLink, name, size, links)},
		{"link under tag 43", cat(unhex(t, "a4 646c696e6b d82b 5825 00"+testCIDHex), name, size, links)},
		{"link without 0x00", cat(unhex(t, "a4 646c696e6b d82a 5824"+testCIDHex), name, size, links)},
		{"not a map", unhex(t, "80")},
		{"empty", nil},
	}
	for _, tt := range tests {
		var v testObject
		err := cas.Unmarshal(tt.data, &v)
		if !errors.Is(err, cas.ErrNotCanonical) {
			t.Errorf("%s: Unmarshal(%x) = %v, want ErrNotCanonical", tt.name, tt.data, err)
		}
	}
}

func TestLinkMarshal(t *testing.T) {
	if _, err := cas.Marshal(cas.Link{}); !errors.Is(err, cas.ErrInvalid) {
		t.Errorf("Marshal(undefined Link): %v, want ErrInvalid", err)
	}
	j, err := cas.Link{Cid: testCID}.MarshalJSON()
	if err != nil || string(j) != `{"/":"`+testCID.String()+`"}` {
		t.Errorf("MarshalJSON = %s, %v", j, err)
	}
	if j2, _ := cas.EncodeJSON(cas.Link{Cid: testCID}); !bytes.Equal(j, j2) {
		t.Errorf("Link.MarshalJSON = %s, EncodeJSON = %s", j, j2)
	}
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

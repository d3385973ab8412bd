package cas_test

import (
	"encoding/json"
	"errors"
	"math/big"
	"reflect"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
)

func TestFromJSON(t *testing.T) {
	in := map[string]any{
		"int": float64(3), "neg": float64(-7), "frac": 1.5, "big": float64(1 << 60),
		"num": json.Number("42"), "numf": json.Number("0.25"), "go": 5,
		"list": []any{float64(1), "s", nil, true}, "nested": map[string]any{"x": float64(2)},
	}
	want := map[string]any{
		"int": int64(3), "neg": int64(-7), "frac": 1.5, "big": float64(1 << 60),
		"num": int64(42), "numf": 0.25, "go": int64(5),
		"list": []any{int64(1), "s", nil, true}, "nested": map[string]any{"x": int64(2)},
	}
	got := cas.FromJSON(in)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
	if _, err := cas.EncodeNode(got); err != nil {
		t.Fatalf("the result is not in the data model: %v", err)
	}
	if in["int"] != float64(3) {
		t.Fatal("FromJSON changed its input")
	}
}

func TestIsNormal(t *testing.T) {
	for _, tt := range []struct {
		v    any
		want bool
	}{
		{map[string]any{"a": []any{int64(1), "x", 1.5, nil, true}}, true},
		{map[string]any{"a": []any{float64(2)}}, false},
		{map[string]any{"a": json.Number("3")}, false},
		{[]any{map[string]any{"b": 7}}, false},
		{float64(1 << 60), true},
	} {
		if got := cas.IsNormal(tt.v); got != tt.want {
			t.Errorf("IsNormal(%#v) = %v, want %v", tt.v, got, tt.want)
		}
		// What IsNormal calls normal, FromJSON leaves as it is.
		if tt.want && !reflect.DeepEqual(cas.FromJSON(tt.v), tt.v) {
			t.Errorf("FromJSON changed %#v, which IsNormal calls normal", tt.v)
		}
	}
}

// TestDecodePlainJSON: plain JSON is read as strictly as DAG-JSON, with
// "/" meaning nothing, and a duplicate key or a number out of range is
// named as such.
func TestDecodePlainJSON(t *testing.T) {
	got, err := cas.DecodePlainJSON([]byte(` {"a": [1, 2.5, -0, "s", null, true, 0e-400, 0.0e5, 5e-324], "/": "bafyno", "b": {"/": {"bytes": "x"}},
		"u64": 18446744073709551615} `))
	if err != nil {
		t.Fatal(err)
	}
	u64, _ := new(big.Int).SetString("18446744073709551615", 10)
	want := map[string]any{
		"a": []any{int64(1), 2.5, int64(0), "s", nil, true, 0.0, 0.0, 5e-324}, "/": "bafyno",
		"b": map[string]any{"/": map[string]any{"bytes": "x"}}, "u64": u64,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"value": 1, "value": 2}`, `json at byte 13: duplicate key "value"`},
		{`{"a": {"k": 1, "k": 1}}`, `duplicate key "k"`},
		{`{"value": 1e400}`, `json at byte 10: number 1e400 is out of range`},
		{`{"value": -1e400}`, `number -1e400 is out of range`},
		{`{"value": 1e-400}`, `json at byte 10: number 1e-400 is out of range: it underflows float64`},
		{`{"value": -2.5e-330}`, `number -2.5e-330 is out of range: it underflows`},
		{`{"value": 123456789012345678901234567890}`, `integer 123456789012345678901234567890 is out of range`},
		{`{"a": 1} {}`, `data after the value`},
		{"{\"a\": \"\xff\"}", `invalid UTF-8`},
	} {
		_, err := cas.DecodePlainJSON([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DecodePlainJSON(%s) = %v, want an error with %q", tc.in, err, tc.want)
		}
		if !errors.Is(err, cas.ErrInvalid) {
			t.Errorf("DecodePlainJSON(%s): %v does not wrap ErrInvalid", tc.in, err)
		}
	}
}

func TestKindOf(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{nil, "null"}, {true, "a boolean"}, {"s", "a string"}, {[]byte{1}, "bytes"},
		{[]any{}, "an array"}, {map[string]any{}, "an object"}, {int64(1), "a number"}, {1.5, "a number"},
		{cas.NewBlock(cas.Raw, nil).CID(), "a link"},
	} {
		if got := cas.KindOf(c.v); got != c.want {
			t.Errorf("KindOf(%#v) = %q, want %q", c.v, got, c.want)
		}
	}
}

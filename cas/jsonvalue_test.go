package cas_test

import (
	"encoding/json"
	"reflect"
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

package haygent

import (
	"encoding/json"
	"math"
)

// toDataModel converts JSON-decoded values into DAG-CBOR data-model
// values: integral float64 and json.Number become int64.
func toDataModel(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = toDataModel(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = toDataModel(e)
		}
		return s
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
		return x
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case int:
		return int64(x)
	default:
		return v
	}
}

// fromDataModel turns data-model values into what encoding/json writes
// faithfully (bytes and links as strings).
func fromDataModel(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = fromDataModel(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = fromDataModel(e)
		}
		return s
	default:
		return v
	}
}

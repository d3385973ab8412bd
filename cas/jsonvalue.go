package cas

import (
	"encoding/json"
	"math"
)

// FromJSON turns values decoded by encoding/json (float64 or json.Number
// numbers, int) into data-model values: integral numbers within ±2^53
// become int64, others float64. Maps and slices are copied; other values
// are returned as they are. Use it before [EncodeNode] on JSON input.
func FromJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = FromJSON(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = FromJSON(e)
		}
		return s
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
		return x
	case int:
		return int64(x)
	}
	return v
}

// IsNormal reports whether v needs no change by [FromJSON]: it holds no
// json.Number, no int, and no float64 that FromJSON would make an int64.
// Callers that need no copy use it to skip one.
func IsNormal(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			if !IsNormal(e) {
				return false
			}
		}
	case []any:
		for _, e := range x {
			if !IsNormal(e) {
				return false
			}
		}
	case json.Number, int:
		return false
	case float64:
		return !(x == math.Trunc(x) && math.Abs(x) < 1<<53)
	}
	return true
}

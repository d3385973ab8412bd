package cas

import (
	"encoding/json"
	"math"

	"github.com/ipfs/go-cid"
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

// DecodePlainJSON parses one plain JSON value, such as a Haygent's input,
// as strictly as [DecodeJSON] does: exactly one value, valid UTF-8, no
// duplicate keys (the error names the key), integers in [-2^64, 2^64-1]
// and floats that do not overflow (the error says the number is out of
// range), nesting at most 512 deep. Unlike DAG-JSON, it gives "/" no
// meaning: {"/": "bafy..."} is a map holding a string, never a link, and
// no input is refused for looking like one. Numbers come out as in
// DecodeJSON: int64 or *big.Int for integers, float64 for numbers with a
// fraction or an exponent.
//
// encoding/json keeps the last of two equal keys and turns 1e400 into a
// decode error only when decoding into a float64 (a json.Number holds it
// until its use, far from the input): input that means two things, or
// nothing, must be refused where it is read.
//
// Errors are [*JSONError] values (Plain set), which wrap [ErrInvalid].
func DecodePlainJSON(data []byte) (any, error) {
	p := jsonParser{data: data, plain: true}
	return p.decode()
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

// KindOf names the kind of a value of the data model, for messages:
// "null", "a boolean", "a string", "bytes", "an array", "an object", "a
// link" or "a number".
func KindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case []byte:
		return "bytes"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	case cid.Cid:
		return "a link"
	}
	return "a number"
}

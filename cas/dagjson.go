package cas

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ipfs/go-cid"
)

// DagJSON is the multicodec of DAG-JSON. hg never stores DAG-JSON blocks;
// it reads and prints DAG-JSON as the human form of DAG-CBOR data.
const DagJSON = cid.DagJSON // 0x0129

// JSONError reports DAG-JSON input that [DecodeJSON] refuses, or a value
// [EncodeJSON] cannot write. It wraps [ErrInvalid] and, for a link whose
// string is not a CID, [ErrBadCID].
type JSONError struct {
	// Offset is the byte offset in the input where the problem was
	// found, or -1 when encoding.
	Offset int
	// Err says what is wrong.
	Err error
	// Plain says the input was read as plain JSON ([DecodePlainJSON]),
	// not DAG-JSON.
	Plain bool
}

func (e *JSONError) Error() string {
	name := "dag-json"
	if e.Plain {
		name = "json"
	}
	if e.Offset < 0 {
		return fmt.Sprintf("%s: %v", name, e.Err)
	}
	return fmt.Sprintf("%s at byte %d: %v", name, e.Offset, e.Err)
}

// Unwrap returns [ErrInvalid] and the underlying error.
func (e *JSONError) Unwrap() []error { return []error{ErrInvalid, e.Err} }

// DecodeJSON parses one DAG-JSON value into the data model types listed at
// [EncodeNode], with int64 or *big.Int for integers and float64 for
// numbers with a fraction or an exponent.
//
// It accepts any RFC 8259 JSON with these rules: the input holds exactly
// one value, surrounded only by JSON whitespace; strings are valid UTF-8
// (an escaped lone surrogate is refused); objects have no duplicate keys;
// integers must lie in [-2^64, 2^64-1] and floats must not overflow;
// arrays and objects nest at most 512 deep, as in DAG-CBOR. Key order and
// whitespace are free, so the output of [EncodeJSON] is the canonical form,
// not the only one accepted.
//
// An object whose first key, as written or in bytewise order, is "/" is in
// the reserved namespace of the DAG-JSON spec: {"/":"<cid>"} is a link and
// its string must parse as a CID; {"/":{"bytes":"<base64>"}} is bytes, in
// standard base64 without padding; any other such object whose "/" value
// is a string, or is an object whose first key (again as written or in
// bytewise order) is "bytes" with a string value, is refused. Every other
// object, such as {"/":true} or {"":1,"/":"x"}, is an ordinary map.
//
// Errors are [*JSONError] values, which wrap [ErrInvalid].
func DecodeJSON(data []byte) (any, error) {
	p := jsonParser{data: data}
	return p.decode()
}

// decode parses the one value of p.data.
func (p *jsonParser) decode() (any, error) {
	p.skipSpace()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.off < len(p.data) {
		return nil, p.errorf(p.off, "data after the value")
	}
	return v, nil
}

type jsonParser struct {
	data []byte
	off  int
	// plain: no reserved namespace, every object is a map (DecodePlainJSON).
	plain bool
}

func (p *jsonParser) errorf(off int, format string, args ...any) error {
	return &JSONError{Offset: off, Err: fmt.Errorf(format, args...), Plain: p.plain}
}

func (p *jsonParser) unexpected() error {
	if p.off >= len(p.data) {
		return p.errorf(p.off, "unexpected end of input")
	}
	return p.errorf(p.off, "unexpected %s", quoteByte(p.data[p.off]))
}

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (p *jsonParser) skipSpace() {
	for p.off < len(p.data) {
		switch p.data[p.off] {
		case ' ', '\t', '\n', '\r':
			p.off++
		default:
			return
		}
	}
}

// value parses the value at p.off, which is not whitespace. depth counts
// the JSON arrays and objects around it.
func (p *jsonParser) value(depth int) (any, error) {
	if p.off >= len(p.data) {
		return nil, p.unexpected()
	}
	switch c := p.data[p.off]; {
	case c == '{':
		v, _, err := p.object(depth, false)
		return v, err
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	default:
		return nil, p.unexpected()
	}
}

func (p *jsonParser) literal(word string) error {
	if len(p.data)-p.off < len(word) || string(p.data[p.off:p.off+len(word)]) != word {
		return p.errorf(p.off, "invalid literal, want %s", word)
	}
	p.off += len(word)
	return nil
}

func (p *jsonParser) tooDeep(off int) error {
	return p.errorf(off, "nesting deeper than %d", maxDepth)
}

func (p *jsonParser) array(depth int) (any, error) {
	start := p.off
	if depth >= maxDepth {
		return nil, p.tooDeep(start)
	}
	p.off++ // [
	out := []any{}
	p.skipSpace()
	if p.off < len(p.data) && p.data[p.off] == ']' {
		p.off++
		return out, nil
	}
	for {
		p.skipSpace()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		p.skipSpace()
		if p.off >= len(p.data) {
			return nil, p.unexpected()
		}
		switch p.data[p.off] {
		case ',':
			p.off++
		case ']':
			p.off++
			return out, nil
		default:
			return nil, p.errorf(p.off, "unexpected %s in array, want ',' or ']'", quoteByte(p.data[p.off]))
		}
	}
}

// object parses the object at p.off. depth counts the JSON arrays and
// objects around it; slashValue says it is the value of a "/" key, so that
// it may be the inner object of a bytes form. bytesInner reports that the
// object has the shape of that inner object: a "bytes" key, first as
// written or in bytewise order, with a string value.
func (p *jsonParser) object(depth int, slashValue bool) (any, bool, error) {
	start := p.off
	// An ordinary map may nest maxDepth deep; the two objects of a bytes
	// form may lie at depths maxDepth and maxDepth+1.
	if depth > maxDepth+1 {
		return nil, false, p.tooDeep(start)
	}
	p.off++ // {
	m := map[string]any{}
	first := ""
	slashOff := -1
	slashBytes := false // the value of "/" has the shape of a bytes form's inner object
	p.skipSpace()
	if p.off < len(p.data) && p.data[p.off] == '}' {
		p.off++
	} else {
		for {
			p.skipSpace()
			if p.off >= len(p.data) || p.data[p.off] != '"' {
				if p.off < len(p.data) {
					return nil, false, p.errorf(p.off, "unexpected %s, want a string key", quoteByte(p.data[p.off]))
				}
				return nil, false, p.unexpected()
			}
			keyOff := p.off
			k, err := p.str()
			if err != nil {
				return nil, false, err
			}
			if _, dup := m[k]; dup {
				return nil, false, p.errorf(keyOff, "duplicate key %q", k)
			}
			if len(m) == 0 {
				first = k
			}
			p.skipSpace()
			if p.off >= len(p.data) || p.data[p.off] != ':' {
				if p.off < len(p.data) {
					return nil, false, p.errorf(p.off, "unexpected %s after a key, want ':'", quoteByte(p.data[p.off]))
				}
				return nil, false, p.unexpected()
			}
			p.off++
			p.skipSpace()
			var v any
			if k == "/" && !p.plain {
				slashOff = p.off
				if p.off < len(p.data) && p.data[p.off] == '{' {
					v, slashBytes, err = p.object(depth+1, true)
				} else {
					v, err = p.value(depth + 1)
				}
			} else {
				v, err = p.value(depth + 1)
			}
			if err != nil {
				return nil, false, err
			}
			m[k] = v
			p.skipSpace()
			if p.off >= len(p.data) {
				return nil, false, p.unexpected()
			}
			if p.data[p.off] == ',' {
				p.off++
				continue
			}
			if p.data[p.off] == '}' {
				p.off++
				break
			}
			return nil, false, p.errorf(p.off, "unexpected %s in object, want ',' or '}'", quoteByte(p.data[p.off]))
		}
	}

	// The reserved namespace: "/" is the first key as written or in
	// bytewise order (EncodeJSON writes them in that order).
	if slashOff >= 0 && (first == "/" || firstKeyIs(m, "/")) {
		switch x := m["/"].(type) {
		case string:
			if len(m) != 1 {
				return nil, false, p.errorf(start, `a link {"/":"<cid>"} must have no other key`)
			}
			c, err := cid.Decode(x)
			if err != nil {
				return nil, false, &JSONError{Offset: slashOff, Err: fmt.Errorf("link %q: %w", x, ErrBadCID), Plain: p.plain}
			}
			return c, false, nil
		case map[string]any:
			if slashBytes {
				if len(x) != 1 || len(m) != 1 {
					return nil, false, p.errorf(start, `bytes {"/":{"bytes":"<base64>"}} must have no other key`)
				}
				b, err := decodeBase64(x["bytes"].(string))
				if err != nil {
					return nil, false, p.errorf(slashOff, "bytes: %v", err)
				}
				return b, false, nil
			}
		}
	}

	// m is an ordinary map. The value of its "/" key skipped the depth
	// check in case it was the inner object of a bytes form; it was not.
	if _, ok := m["/"].(map[string]any); ok && slashOff >= 0 && depth+1 >= maxDepth {
		return nil, false, p.tooDeep(slashOff)
	}
	if depth >= maxDepth && !slashValue {
		return nil, false, p.tooDeep(start)
	}
	_, isString := m["bytes"].(string)
	bytesInner := isString && (first == "bytes" || firstKeyIs(m, "bytes"))
	return m, bytesInner, nil
}

// firstKeyIs reports whether k is a key of m and no key of m sorts before
// it bytewise.
func firstKeyIs[V any](m map[string]V, k string) bool {
	if _, ok := m[k]; !ok {
		return false
	}
	for key := range m {
		if key < k {
			return false
		}
	}
	return true
}

func decodeBase64(s string) ([]byte, error) {
	// The decoder skips CR and LF; DAG-JSON has no place for them.
	if strings.ContainsAny(s, "\r\n") {
		return nil, errors.New("line break in base64")
	}
	b, err := base64.RawStdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, errors.New("not standard base64 without padding")
	}
	return b, nil
}

// str parses the string at p.off, which is a '"'.
func (p *jsonParser) str() (string, error) {
	start := p.off
	p.off++
	seg := p.off
	var buf []byte
	escaped := false
	for {
		if p.off >= len(p.data) {
			return "", p.errorf(start, "unterminated string")
		}
		c := p.data[p.off]
		switch {
		case c == '"':
			var s string
			if escaped {
				buf = append(buf, p.data[seg:p.off]...)
				s = string(buf)
			} else {
				s = string(p.data[seg:p.off])
			}
			p.off++
			return s, nil
		case c == '\\':
			buf = append(buf, p.data[seg:p.off]...)
			escaped = true
			var err error
			if buf, err = p.escape(buf); err != nil {
				return "", err
			}
			seg = p.off
		case c < 0x20:
			return "", p.errorf(p.off, "control character 0x%02x in string", c)
		case c < utf8.RuneSelf:
			p.off++
		default:
			r, size := utf8.DecodeRune(p.data[p.off:])
			if r == utf8.RuneError && size == 1 {
				return "", p.errorf(p.off, "invalid UTF-8 in string")
			}
			p.off += size
		}
	}
}

// escape appends the character of the escape sequence at p.off to buf.
func (p *jsonParser) escape(buf []byte) ([]byte, error) {
	at := p.off
	if p.off+1 >= len(p.data) {
		return nil, p.errorf(at, "unterminated escape sequence")
	}
	c := p.data[p.off+1]
	p.off += 2
	switch c {
	case '"', '\\', '/':
		return append(buf, c), nil
	case 'b':
		return append(buf, '\b'), nil
	case 'f':
		return append(buf, '\f'), nil
	case 'n':
		return append(buf, '\n'), nil
	case 'r':
		return append(buf, '\r'), nil
	case 't':
		return append(buf, '\t'), nil
	case 'u':
		r, ok := p.hex4()
		if !ok {
			return nil, p.errorf(at, `invalid \u escape`)
		}
		if utf16.IsSurrogate(r) {
			if r >= 0xdc00 || p.off+1 >= len(p.data) || p.data[p.off] != '\\' || p.data[p.off+1] != 'u' {
				return nil, p.errorf(at, "unpaired surrogate in string")
			}
			p.off += 2
			r2, ok := p.hex4()
			if !ok {
				return nil, p.errorf(p.off-6, `invalid \u escape`)
			}
			if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
				return nil, p.errorf(at, "unpaired surrogate in string")
			}
		}
		return utf8.AppendRune(buf, r), nil
	default:
		return nil, p.errorf(at, "invalid escape %s", quoteByte(c))
	}
}

func (p *jsonParser) hex4() (rune, bool) {
	if len(p.data)-p.off < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.off : p.off+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	p.off += 4
	return r, true
}

// number parses the number at p.off: an integer without '.', 'e' or 'E'
// becomes int64 or *big.Int, anything else float64.
func (p *jsonParser) number() (any, error) {
	start := p.off
	digits := func() int {
		n := 0
		for p.off < len(p.data) && p.data[p.off] >= '0' && p.data[p.off] <= '9' {
			p.off++
			n++
		}
		return n
	}
	if p.data[p.off] == '-' {
		p.off++
	}
	switch {
	case p.off < len(p.data) && p.data[p.off] == '0':
		p.off++
	case digits() == 0:
		return nil, p.errorf(start, "invalid number")
	}
	isInt := true
	if p.off < len(p.data) && p.data[p.off] == '.' {
		p.off++
		isInt = false
		if digits() == 0 {
			return nil, p.errorf(start, "invalid number: no digit after '.'")
		}
	}
	if p.off < len(p.data) && (p.data[p.off] == 'e' || p.data[p.off] == 'E') {
		p.off++
		isInt = false
		if p.off < len(p.data) && (p.data[p.off] == '+' || p.data[p.off] == '-') {
			p.off++
		}
		if digits() == 0 {
			return nil, p.errorf(start, "invalid number: no digit in exponent")
		}
	}
	text := string(p.data[start:p.off])
	if !isInt {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, p.errorf(start, "number %s is out of range: it overflows float64", text)
		}
		// Too small for float64, a number would silently become 0: it is
		// refused as its opposite, too large, is.
		if mant, _, _ := strings.Cut(strings.ToLower(text), "e"); f == 0 && strings.ContainsAny(mant, "123456789") {
			return nil, p.errorf(start, "number %s is out of range: it underflows float64 (it would read as 0)", text)
		}
		return f, nil
	}
	if i, err := strconv.ParseInt(text, 10, 64); err == nil {
		return i, nil
	}
	// Beyond int64. 2^64 has 20 digits and JSON has no leading zeros.
	if len(strings.TrimPrefix(text, "-")) <= 20 {
		if b, ok := new(big.Int).SetString(text, 10); ok && b.Cmp(minUint64Neg) >= 0 && b.Cmp(maxUint64) <= 0 {
			return b, nil
		}
	}
	return nil, p.errorf(start, "integer %s is out of range: want [-2^64, 2^64-1]", text)
}

// EncodeJSON encodes a value of the data model (see [EncodeNode]) as
// canonical DAG-JSON, the form of the IPLD codec fixtures: no whitespace,
// map keys sorted by their UTF-8 bytes, links as {"/":"<cid>"} with the
// CID in its default string form (base58 for v0, base32 for v1), bytes as
// {"/":{"bytes":"<base64>"}} in standard base64 without padding, strings
// escaped as JavaScript's JSON.stringify does (only '"', '\\' and control
// characters), integers in decimal, and floats in the shortest form that
// reads back to the same float64, with ".0" added when that form has no
// '.' or exponent (so -0 is written -0.0).
//
// A map that DAG-JSON cannot represent is refused: one whose first key in
// bytewise order is "/" with a string value, or with a map value whose
// first key is "bytes" with a string value. So is everything [EncodeNode]
// refuses. Errors are [*JSONError] values, which wrap [ErrInvalid].
func EncodeJSON(n any) ([]byte, error) {
	e := jsonEncoder{}
	if err := e.encode(n, 0); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// EncodeJSONIndent is like [EncodeJSON] but for people: each element of a
// non-empty array or map starts on a new line, indented by one copy of
// indent per level of nesting, and keys are followed by ": ". Links and
// bytes stay on one line. The result reads back with [DecodeJSON] to the
// same value but is not canonical DAG-JSON: never hash it.
func EncodeJSONIndent(n any, indent string) ([]byte, error) {
	e := jsonEncoder{indent: indent, pretty: true}
	if err := e.encode(n, 0); err != nil {
		return nil, err
	}
	return e.buf, nil
}

type jsonEncoder struct {
	buf    []byte
	indent string
	pretty bool
}

func encodeErr(format string, args ...any) error {
	return &JSONError{Offset: -1, Err: fmt.Errorf(format, args...)}
}

func (e *jsonEncoder) newline(depth int) {
	if e.pretty {
		e.buf = append(e.buf, '\n')
		for range depth {
			e.buf = append(e.buf, e.indent...)
		}
	}
}

// encode writes n, which lies inside depth arrays and maps.
func (e *jsonEncoder) encode(n any, depth int) error {
	switch x := n.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case bool:
		e.buf = strconv.AppendBool(e.buf, x)
	case int:
		e.buf = strconv.AppendInt(e.buf, int64(x), 10)
	case int8:
		e.buf = strconv.AppendInt(e.buf, int64(x), 10)
	case int16:
		e.buf = strconv.AppendInt(e.buf, int64(x), 10)
	case int32:
		e.buf = strconv.AppendInt(e.buf, int64(x), 10)
	case int64:
		e.buf = strconv.AppendInt(e.buf, x, 10)
	case uint:
		e.buf = strconv.AppendUint(e.buf, uint64(x), 10)
	case uint8:
		e.buf = strconv.AppendUint(e.buf, uint64(x), 10)
	case uint16:
		e.buf = strconv.AppendUint(e.buf, uint64(x), 10)
	case uint32:
		e.buf = strconv.AppendUint(e.buf, uint64(x), 10)
	case uint64:
		e.buf = strconv.AppendUint(e.buf, x, 10)
	case *big.Int:
		if x == nil {
			return encodeErr("nil *big.Int")
		}
		if x.Cmp(minUint64Neg) < 0 || x.Cmp(maxUint64) > 0 {
			return encodeErr("integer %s outside 64 bits", x)
		}
		e.buf = x.Append(e.buf, 10)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return encodeErr("float %v", x)
		}
		e.buf = appendFloat(e.buf, x)
	case string:
		if !utf8.ValidString(x) {
			return encodeErr("string is not valid UTF-8")
		}
		e.buf = appendJSONString(e.buf, x)
	case []byte:
		e.buf = append(e.buf, `{"/":{"bytes":"`...)
		e.buf = base64.RawStdEncoding.AppendEncode(e.buf, x)
		e.buf = append(e.buf, `"}}`...)
	case cid.Cid:
		if !x.Defined() {
			return encodeErr("undefined CID")
		}
		e.buf = append(e.buf, `{"/":"`...)
		e.buf = append(e.buf, x.String()...)
		e.buf = append(e.buf, `"}`...)
	case Link:
		return e.encode(x.Cid, depth)
	case []any:
		if depth >= maxDepth {
			return encodeErr("nesting deeper than %d", maxDepth)
		}
		e.buf = append(e.buf, '[')
		for i, v := range x {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.newline(depth + 1)
			if err := e.encode(v, depth+1); err != nil {
				return err
			}
		}
		if len(x) > 0 {
			e.newline(depth)
		}
		e.buf = append(e.buf, ']')
	case map[string]any:
		if depth >= maxDepth {
			return encodeErr("nesting deeper than %d", maxDepth)
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			if !utf8.ValidString(k) {
				return encodeErr("map key is not valid UTF-8")
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if len(keys) > 0 && keys[0] == "/" && reserved(x["/"]) {
			return encodeErr(`map with a "/" key DAG-JSON would read as a link or bytes`)
		}
		e.buf = append(e.buf, '{')
		for i, k := range keys {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.newline(depth + 1)
			e.buf = appendJSONString(e.buf, k)
			e.buf = append(e.buf, ':')
			if e.pretty {
				e.buf = append(e.buf, ' ')
			}
			if err := e.encode(x[k], depth+1); err != nil {
				return err
			}
		}
		if len(keys) > 0 {
			e.newline(depth)
		}
		e.buf = append(e.buf, '}')
	default:
		return encodeErr("type %T is not in the data model", n)
	}
	return nil
}

// reserved reports whether v, the value of the first key "/" of a map,
// puts the map in DAG-JSON's reserved namespace.
func reserved(v any) bool {
	switch x := v.(type) {
	case string:
		return true
	case map[string]any:
		_, ok := x["bytes"].(string)
		return ok && firstKeyIs(x, "bytes")
	}
	return false
}

// appendFloat writes f as JavaScript's Number.prototype.toString does
// (the shortest decimal that reads back to f, in exponent form below 1e-6
// and from 1e21 up), adding ".0" if the result has no '.' or exponent.
func appendFloat(buf []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(buf)
	buf = strconv.AppendFloat(buf, f, format, -1, 64)
	if format == 'e' {
		// e-07 to e-7, as JavaScript writes it.
		n := len(buf)
		if n-start >= 4 && buf[n-4] == 'e' && buf[n-3] == '-' && buf[n-2] == '0' {
			buf[n-2] = buf[n-1]
			buf = buf[:n-1]
		}
		return buf
	}
	if !slices.Contains(buf[start:], '.') {
		buf = append(buf, ".0"...)
	}
	return buf
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s, valid UTF-8, as a JSON string escaped as
// JavaScript's JSON.stringify does.
func appendJSONString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	seg := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf = append(buf, s[seg:i]...)
		switch c {
		case '"', '\\':
			buf = append(buf, '\\', c)
		case '\b':
			buf = append(buf, '\\', 'b')
		case '\f':
			buf = append(buf, '\\', 'f')
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\r':
			buf = append(buf, '\\', 'r')
		case '\t':
			buf = append(buf, '\\', 't')
		default:
			buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		seg = i + 1
	}
	buf = append(buf, s[seg:]...)
	return append(buf, '"')
}

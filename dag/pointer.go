package dag

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNoValue is wrapped by [Lookup] when a pointer reaches nothing in a
// document.
var ErrNoValue = errors.New("no value at pointer")

// ParsePointer splits an RFC 6901 JSON Pointer into its unescaped
// reference tokens ("~1" is "/", "~0" is "~"). The empty pointer, the
// whole document, has no tokens. A pointer that is not empty must start
// with "/", and "~" must be followed by "0" or "1".
func ParsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, errors.New(`must be empty or start with "/"`)
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		if !strings.Contains(s, "~") {
			continue
		}
		var b strings.Builder
		for j := 0; j < len(s); j++ {
			if s[j] != '~' {
				b.WriteByte(s[j])
				continue
			}
			if j+1 == len(s) || (s[j+1] != '0' && s[j+1] != '1') {
				return nil, errors.New(`"~" must be followed by "0" or "1"`)
			}
			if s[j+1] == '0' {
				b.WriteByte('~')
			} else {
				b.WriteByte('/')
			}
			j++
		}
		parts[i] = b.String()
	}
	return parts, nil
}

// escapeToken escapes one reference token for a JSON Pointer.
func escapeToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// arrayIndex parses a reference token as an array index: "0" or a decimal
// number without a leading zero. "-" (past the end) is not an index here:
// it never names an existing element.
func arrayIndex(tok string) (int, bool) {
	if tok == "" || len(tok) > 9 || (len(tok) > 1 && tok[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(tok)
	return n, err == nil
}

// Lookup returns the value at pointer in doc, a data-model value
// (map[string]any and []any containers). A pointer that does not parse
// wraps [ErrInvalid]; one that reaches nothing wraps [ErrNoValue]. The
// value is doc's own, not a copy.
func Lookup(doc any, pointer string) (any, error) {
	toks, err := ParsePointer(pointer)
	if err != nil {
		return nil, fmt.Errorf("pointer %q: %v: %w", pointer, err, ErrInvalid)
	}
	v := doc
	for i, t := range toks {
		switch x := v.(type) {
		case map[string]any:
			e, ok := x[t]
			if !ok {
				return nil, fmt.Errorf("pointer %q: no member %q at %q: %w", pointer, t, prefix(toks[:i]), ErrNoValue)
			}
			v = e
		case []any:
			n, ok := arrayIndex(t)
			if !ok || n >= len(x) {
				return nil, fmt.Errorf("pointer %q: no element %q in the array at %q: %w", pointer, t, prefix(toks[:i]), ErrNoValue)
			}
			v = x[n]
		default:
			return nil, fmt.Errorf("pointer %q: %q is neither an object nor an array: %w", pointer, prefix(toks[:i]), ErrNoValue)
		}
	}
	return v, nil
}

// prefix rebuilds the pointer made of toks.
func prefix(toks []string) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteByte('/')
		b.WriteString(escapeToken(t))
	}
	return b.String()
}

package sandbox

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"slices"
	"strings"
)

// Redacted is what [Redact] puts in place of each secret value. Every
// value gets the same mark, so the output does not depend on the order of
// the secrets or say which one was printed.
const Redacted = "[REDACTED]"

// Redact returns b with every occurrence of each non-empty secret
// replaced by [Redacted]. Besides the raw value it catches, for values of
// 4 bytes or more, the value's hex (either case) and base64 (standard and
// URL alphabets, padded or not, and inside a longer base64 text such as
// an HTTP Basic credential, at any alignment), and, for values that
// change when escaped, their URL query and path escapes. Overlapping or
// adjacent occurrences become one mark.
//
// Redact never modifies b; it returns b itself when there is nothing to
// replace. A short or common secret value ("1", "test") redacts every
// occurrence of that text, wanted or not.
func Redact(b []byte, secrets []string) []byte {
	return redactUpTo(b, secretForms(secrets), len(b))
}

// secretForms returns the byte strings to redact for secrets, without
// duplicates.
func secretForms(secrets []string) [][]byte {
	seen := map[string]bool{}
	var forms [][]byte
	add := func(f string) {
		if f != "" && !seen[f] {
			seen[f] = true
			forms = append(forms, []byte(f))
		}
	}
	for _, s := range secrets {
		if s == "" {
			continue
		}
		add(s)
		add(url.QueryEscape(s))
		add(url.PathEscape(s))
		if len(s) < 4 {
			continue // derived forms of shorter values match too much
		}
		h := hex.EncodeToString([]byte(s))
		add(h)
		add(strings.ToUpper(h))
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			for _, core := range base64Cores(enc, s) {
				add(core)
			}
		}
	}
	return forms
}

// base64Cores returns, for each of the three alignments s can have in a
// longer base64 text, the characters that depend on s alone. At offset 0
// that is the whole unpadded encoding of s but for a final character that
// also holds bits of whatever follows. Cores under 6 characters (36 bits)
// are left out as too likely to occur by chance.
func base64Cores(enc *base64.Encoding, s string) []string {
	var cores []string
	for shift := range 3 {
		buf := make([]byte, shift+len(s))
		copy(buf[shift:], s)
		e := enc.EncodeToString(buf)
		lo := (8*shift + 5) / 6        // first character with no bit of the prefix
		hi := 8 * (shift + len(s)) / 6 // characters wholly inside s end here
		if hi-lo >= 6 {
			cores = append(cores, e[lo:hi])
		}
	}
	return cores
}

type span struct{ lo, hi int }

// redactUpTo returns b[:cut] with every occurrence in b of each form
// replaced by [Redacted]. Occurrences that overlap or touch are merged
// first; if a merged one runs across cut, it is replaced whole and the
// output ends with its mark, so no part of a value is left at the cut.
func redactUpTo(b []byte, forms [][]byte, cut int) []byte {
	var spans []span
	for _, f := range forms {
		// Occurrences of one form come in order, so runs of overlapping
		// ones (a repeated value, "aa" in "aaa") merge as they are found.
		n := len(spans)
		for i := 0; ; {
			j := bytes.Index(b[i:], f)
			if j < 0 {
				break
			}
			lo, hi := i+j, i+j+len(f)
			if len(spans) > n && lo <= spans[len(spans)-1].hi {
				spans[len(spans)-1].hi = hi
			} else {
				spans = append(spans, span{lo, hi})
			}
			i = lo + 1
		}
	}
	if len(spans) == 0 {
		return b[:cut]
	}
	slices.SortFunc(spans, func(x, y span) int { return x.lo - y.lo })
	out := make([]byte, 0, cut)
	pos := 0
	for k := 0; k < len(spans) && spans[k].lo < cut; {
		sp := spans[k]
		for k++; k < len(spans) && spans[k].lo <= sp.hi; k++ {
			sp.hi = max(sp.hi, spans[k].hi)
		}
		out = append(out, b[pos:sp.lo]...)
		out = append(out, Redacted...)
		pos = sp.hi
	}
	if pos < cut {
		out = append(out, b[pos:cut]...)
	}
	return out
}

// Holds reports whether b holds any of the forms of any of secrets that
// [Redact] would replace.
func Holds(b []byte, secrets []string) bool {
	for _, f := range secretForms(secrets) {
		if bytes.Contains(b, f) {
			return true
		}
	}
	return false
}

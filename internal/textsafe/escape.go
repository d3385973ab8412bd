// Package textsafe makes text read from a ledger, a store or a package
// safe to print on a terminal: what is printed is what the record holds,
// and the record cannot move the cursor, clear a line, colour the screen,
// reorder the text around it or start a line of its own.
package textsafe

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape returns s with every character a terminal would not show as
// written replaced by a visible escape, and s itself when there is none:
//
//   - C0 controls and DEL: \n, \r, \t, else \xNN (\x1b for ESC), so a
//     field can never end its line or rewrite the one it is on;
//   - C1 controls (U+0080 to U+009F): \u0085;
//   - format characters (Unicode category Cf: the bidi embeddings and
//     overrides U+202A to U+202E, the isolates U+2066 to U+2069, the marks
//     U+200E, U+200F and U+061C, zero-width characters, U+FEFF, tags) and
//     the line and paragraph separators U+2028 and U+2029: \u202e, or
//     \U000e0001 beyond U+FFFF;
//   - each byte that is not part of valid UTF-8: \xNN.
//
// Every other character, printable UTF-8 and the backslash included, is
// kept as it is. The result is printable UTF-8 and holds no character
// Escape would change, so escaping twice changes nothing.
func Escape(s string) string {
	i := firstUnsafe(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			b.WriteByte(c)
			i++
			continue
		}
		r, size := rune(c), 1
		if c >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		switch {
		case r == utf8.RuneError && size == 1:
			writeHex(&b, "\\x", uint32(c), 2)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			writeHex(&b, "\\x", uint32(r), 2)
		case unsafeRune(r) && r > 0xffff:
			writeHex(&b, "\\U", uint32(r), 8)
		case unsafeRune(r):
			writeHex(&b, "\\u", uint32(r), 4)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Safe reports whether Escape would leave s as it is: s holds no control
// or format character and is valid UTF-8.
func Safe(s string) bool { return firstUnsafe(s) < 0 }

// firstUnsafe returns the index of the first byte of s that Escape
// changes, or -1.
func firstUnsafe(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			return i
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || unsafeRune(r) {
			return i
		}
		i += size
	}
	return -1
}

// unsafeRune reports whether r, a character beyond ASCII, is one a
// terminal acts on or hides instead of showing.
func unsafeRune(r rune) bool {
	return r >= 0x80 && r <= 0x9f || r == 0x2028 || r == 0x2029 || unicode.Is(unicode.Cf, r)
}

func writeHex(b *strings.Builder, prefix string, v uint32, width int) {
	b.WriteString(prefix)
	h := strconv.FormatUint(uint64(v), 16)
	for n := len(h); n < width; n++ {
		b.WriteByte('0')
	}
	b.WriteString(h)
}

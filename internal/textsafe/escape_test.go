package textsafe

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"plain text, 42 / ok", "plain text, 42 / ok"},
		{"café ✓ 日本語 🚀", "café ✓ 日本語 🚀"},
		{`C:\path\x1b stays`, `C:\path\x1b stays`},
		{"\x1b[2K\rstatus PASS", `\x1b[2K\rstatus PASS`},
		{"reason\nstatus PASS", `reason\nstatus PASS`},
		{"a\tb\x00c\x7fd\x08", `a\tb\x00c\x7fd\x08`},
		{"\u0085\u009b31m", `\u0085\u009b31m`},
		{"abc\u202edcba", `abc\u202edcba`},
		{"\u2066x\u2069 \u200e\u200f\u061c", `\u2066x\u2069 \u200e\u200f\u061c`},
		{"zero\u200bwidth\ufeff", `zero\u200bwidth\ufeff`},
		{"line\u2028para\u2029", `line\u2028para\u2029`},
		{"tag\U000E0041", `tag\U000e0041`},
		{"bad \xff\xfe utf8 \xe2\x82", `bad \xff\xfe utf8 \xe2\x82`},
	} {
		got := Escape(c.in)
		if got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
		if Safe(c.in) != (c.in == c.want) {
			t.Errorf("Safe(%q) = %v", c.in, Safe(c.in))
		}
		if !Safe(got) || Escape(got) != got {
			t.Errorf("Escape(%q) = %q is not a fixed point", c.in, got)
		}
	}
}

// TestEscapeEveryRune: whatever the input, the output is valid UTF-8
// without a control character, and every character kept is the input's.
func TestEscapeEveryRune(t *testing.T) {
	for r := rune(0); r <= 0x10ffff; r++ {
		if r >= 0xd800 && r <= 0xdfff {
			continue
		}
		in := "<" + string(r) + ">"
		out := Escape(in)
		if !utf8.ValidString(out) || strings.ContainsFunc(out, func(c rune) bool { return c < 0x20 || c >= 0x7f && c <= 0x9f || unsafeRune(c) }) {
			t.Fatalf("Escape(%q) = %q", in, out)
		}
		if out != in && !strings.HasPrefix(out, `<\`) {
			t.Fatalf("Escape(%q) = %q", in, out)
		}
	}
}

type verdict string

type stringer struct{}

func (stringer) String() string { return "from\x1b[31mString" }

func TestSprintf(t *testing.T) {
	got := Sprintf("%-8s|%s|%v|%d|%v|%s|%q|%s\n", "a\nb", verdict("PASS\r"), errors.New("err\x1b"), 42, []string{"x\ty"}, stringer{}, "q\x1b", nil)
	want := `a\nb    |PASS\r|err\x1b|42|[x\ty]|from\x1b[31mString|"q\x1b"|%!s(<nil>)` + "\n"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := Sprintf("%s %s", "ok", fmt.Sprint(1)); got != "ok 1" {
		t.Errorf("got %q", got)
	}
}

package evidence

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"
)

// withInputLimit runs fn with inputLimit lowered to n.
func withInputLimit(t *testing.T, n int64, fn func()) {
	t.Helper()
	old := inputLimit
	inputLimit = n
	defer func() { inputLimit = old }()
	fn()
}

func TestTruncatedInputIsAProblem(t *testing.T) {
	goIn := `{"Action":"run","Package":"p","Test":"TestA"}` + "\n" + `{"Action":"pass","Package":"p","Test":"TestA"}` + "\n" +
		`{"Action":"pass","Package":"p"}` + "\n"
	junitIn := `<testsuite tests="2"><testcase name="a"/><testcase name="b"/></testsuite>`
	tapIn := "1..2\nok 1\nok 2\n"
	for _, tc := range []struct {
		name  string
		parse func(io.Reader) (*TestReport, error)
		in    string
	}{
		{"go", ParseGoTestJSON, goIn},
		{"junit", ParseJUnit, junitIn},
		{"tap", ParseTAP, tapIn},
	} {
		// Whole input: clean. One byte short of it: a Problem.
		whole, err := tc.parse(strings.NewReader(tc.in))
		if err != nil || !whole.OK() {
			t.Fatalf("%s whole: %v %+v", tc.name, err, whole)
		}
		withInputLimit(t, int64(len(tc.in)), func() {
			r, err := tc.parse(strings.NewReader(tc.in))
			if err != nil || !r.OK() {
				t.Errorf("%s at exactly the limit: %v %+v", tc.name, err, r)
			}
		})
		withInputLimit(t, int64(len(tc.in)-1), func() {
			r, err := tc.parse(strings.NewReader(tc.in))
			if err != nil {
				t.Fatalf("%s over the limit: %v", tc.name, err)
			}
			if r.OK() || !strings.HasPrefix(r.Problems[len(r.Problems)-1], "input truncated") {
				t.Errorf("%s over the limit: OK %v, problems %q", tc.name, r.OK(), r.Problems)
			}
		})
	}
}

func TestClean(t *testing.T) {
	for _, tc := range []struct {
		in  string
		max int
	}{
		{"short", 100},
		{strings.Repeat("é", 100), 51},
		{strings.Repeat("x", 100), 10},
		{"nul\x00byte", 100},
		{"bad\xffutf8", 100},
		{"é", 1},
	} {
		got := clean(tc.in, tc.max)
		if len(got) > tc.max && len(tc.in) > tc.max && tc.max >= len(" …[cut]") {
			t.Errorf("clean(%q, %d) = %q: too long", tc.in, tc.max, got)
		}
		if !utf8.ValidString(got) || strings.Contains(got, "\x00") {
			t.Errorf("clean(%q, %d) = %q: not clean", tc.in, tc.max, got)
		}
	}
}

func TestLineReader(t *testing.T) {
	long := strings.Repeat("a", MaxLineSize+10)
	in := "\xef\xbb\xbffirst\r\nsecond\n\n" + long + "\nlast"
	lr := newLineReader(iotest.HalfReader(strings.NewReader(in)))
	var lines []string
	var longs []bool
	for {
		l, isLong, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(l))
		longs = append(longs, isLong)
	}
	if len(lines) != 5 || lines[0] != "first" || lines[1] != "second" || lines[2] != "" ||
		len(lines[3]) != MaxLineSize || !longs[3] || longs[0] || lines[4] != "last" {
		t.Errorf("lines %d: %q... longs %v", len(lines), lines[:3], longs)
	}
}

func TestLatin1Reader(t *testing.T) {
	var all []byte
	for c := range 256 {
		all = append(all, byte(c))
	}
	got, err := io.ReadAll(&latin1Reader{r: bufio.NewReader(iotest.OneByteReader(bytes.NewReader(all)))})
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for c := range 256 {
		want.WriteRune(rune(c))
	}
	if string(got) != want.String() {
		t.Errorf("latin1 transcoding wrong")
	}
}

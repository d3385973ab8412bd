package perm

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// refMatch is a plain recursive matcher, the specification Match is
// checked against: "**" matches any run of segments, and refSeg matches
// within one. Both remember the answer for each pair of positions, so that
// patterns such as "*a*a*a*a*b" cost a polynomial time here too and cannot
// stall the fuzzer.
func refMatch(pat, name []string) bool {
	return memoMatch(func(match func(i, j int) bool, i, j int) bool {
		switch {
		case i == len(pat):
			return j == len(name)
		case pat[i] == "**":
			return match(i+1, j) || (j < len(name) && match(i, j+1))
		}
		return j < len(name) && refSeg(chars(pat[i]), chars(name[j])) && match(i+1, j+1)
	})
}

// refSeg matches one segment's characters against a pattern's: "*" any
// run, "?" one character, anything else itself.
func refSeg(p, s []string) bool {
	return memoMatch(func(match func(i, j int) bool, i, j int) bool {
		switch {
		case i == len(p):
			return j == len(s)
		case p[i] == "*":
			return match(i+1, j) || (j < len(s) && match(i, j+1))
		case p[i] == "?":
			return j < len(s) && match(i+1, j+1)
		}
		return j < len(s) && p[i] == s[j] && match(i+1, j+1)
	})
}

// memoMatch runs step from positions (0, 0), handing it a match that
// answers each pair of positions once.
func memoMatch(step func(match func(i, j int) bool, i, j int) bool) bool {
	memo := map[[2]int]bool{}
	var match func(i, j int) bool
	match = func(i, j int) bool {
		k := [2]int{i, j}
		if v, ok := memo[k]; ok {
			return v
		}
		v := step(match, i, j)
		memo[k] = v
		return v
	}
	return match(0, 0)
}

var fuzzSeeds = [][2]string{
	{"project/**", "project/a/b.go"},
	{"project/**", "project"},
	{"*.go", "x/a.go"},
	{"**/*.pem", "a/b/k.pem"},
	{"../x", "../x"},
	{"a/../../x", "x"},
	{"a/**/../b", "b"},
	{"**", "/etc/passwd"},
	{"**/..", "a/.."},
	{"?*?", "ab"},
	{"*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaac"},
	{"*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaac"},
	{"**/a/**/a/**/a/**/a/**/a/**/a/b", "a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/c"},
	{"**/a/**/a/**/b", "a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/c"},
	{`a\b`, `a\b`},
	{"é?", "éé"},
	{"\xff?", "\xff\xfe"},
	{".", "."},
	{"", ""},
}

func FuzzGlob(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, p string) {
		if len(pattern) > 64 || len(p) > 64 {
			return // keep each input cheap
		}
		g, err := ParseGlob(pattern)
		hasDotDot := false
		for seg := range strings.SplitSeq(pattern, "/") {
			hasDotDot = hasDotDot || seg == ".."
		}
		if err != nil {
			if g.Match(p) != g.Match(p) { // the zero Glob still works
				t.Fatal("unstable")
			}
			return
		}
		if hasDotDot || strings.HasPrefix(pattern, "/") || strings.ContainsAny(pattern, "\\\x00") {
			t.Fatalf("ParseGlob(%q) accepted a pattern it must refuse: %q", pattern, g)
		}
		s := g.String()
		if s == "" || strings.HasPrefix(s, "/") || strings.HasPrefix(s, "../") || s == ".." {
			t.Fatalf("ParseGlob(%q).String() = %q", pattern, s)
		}
		g2, err := ParseGlob(s)
		if err != nil || g2.String() != s {
			t.Fatalf("ParseGlob(%q) = %q, %v: not idempotent", s, g2, err)
		}

		got := g.Match(p)
		clean, err := CleanPath(p)
		if err != nil {
			if got {
				t.Fatalf("%q matched refused path %q", s, p)
			}
			return
		}
		// A path that matches is inside the workspace.
		if got && (strings.HasPrefix(clean, "/") || clean == ".." || strings.HasPrefix(clean, "../")) {
			t.Fatalf("%q matched %q, outside the workspace", s, p)
		}
		if want := refMatch(g.segs, splitClean(clean)); got != want {
			t.Fatalf("%q.Match(%q) = %v, reference says %v", s, p, got, want)
		}
		if got2 := g2.Match(p); got2 != got {
			t.Fatalf("reparsed %q.Match(%q) = %v, want %v", s, p, got2, got)
		}
		// Every directory above a matching path may hold a match.
		if got {
			segs := splitClean(clean)
			for i := range segs {
				dir := "."
				if i > 0 {
					dir = strings.Join(segs[:i], "/")
				}
				if !g.MayMatchUnder(dir) {
					t.Fatalf("%q matches %q but MayMatchUnder(%q) is false", s, clean, dir)
				}
			}
		}
		if utf8.ValidString(p) {
			// A grant on this pattern never allows a path outside.
			set, err := New([]string{"read:file:" + s}, nil, nil)
			if err == nil {
				for _, out := range []string{"../" + p, "/" + p, p + "/../../x"} {
					if set.Check(Op{VerbRead, KindFile, out}).Allowed {
						t.Fatalf("read:file:%s allows %q", s, out)
					}
				}
			}
		}
	})
}

func FuzzGlobCovers(f *testing.F) {
	f.Add("project/**", "project/*.go", "project/a.go")
	f.Add("**/*.pem", "**/k.pem", "a/k.pem")
	f.Add("*", "?", "a")
	f.Add("a/*/c", "a/**/c", "a/b/b/c")
	f.Fuzz(func(t *testing.T, hp, gp, p string) {
		if len(hp) > 32 || len(gp) > 32 {
			return
		}
		h, err1 := ParseGlob(hp)
		g, err2 := ParseGlob(gp)
		if err1 != nil || err2 != nil {
			return
		}
		if globCovers(h, g) && g.Match(p) && !h.Match(p) {
			t.Fatalf("globCovers(%q, %q) but %q matches only the second", h, g, p)
		}
	})
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(example))
	f.Add([]byte(`{"grants": ["network:[::1]:80", "spend:1.5USD"], "deny": ["secret:A"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			return
		}
		// Whatever parses has a stable snapshot and widens nothing of
		// itself.
		if w := s.Widens(s); w != nil {
			t.Fatalf("set widens itself: %q", w)
		}
		_ = s.Snapshot()
		_ = s.Check(Op{VerbRead, KindFile, "a"})
	})
}

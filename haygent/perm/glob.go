package perm

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// CleanPath checks that p is a workspace-relative, slash-separated path and
// returns it cleaned with [path.Clean]; "." is the workspace root. It
// refuses, with an error wrapping [ErrBadPath], a path that is empty,
// absolute (or has a volume name), holds a ".." segment (even one that
// cleaning would remove, such as "a/../b"), a backslash or a NUL byte.
func CleanPath(p string) (string, error) {
	if err := checkRel(p); err != nil {
		return "", err
	}
	return path.Clean(p), nil
}

func checkRel(p string) error {
	var why string
	switch {
	case p == "":
		why = "empty"
	case strings.IndexByte(p, 0) >= 0:
		why = "holds a NUL byte"
	case strings.IndexByte(p, '\\') >= 0:
		why = "holds a backslash"
	case strings.HasPrefix(p, "/") || filepath.IsAbs(p) || filepath.VolumeName(p) != "":
		why = "absolute"
	default:
		for seg := range strings.SplitSeq(p, "/") {
			if seg == ".." {
				why = `holds a ".." segment`
				break
			}
		}
	}
	if why != "" {
		return fmt.Errorf("%w: %q: %s", ErrBadPath, p, why)
	}
	return nil
}

// splitClean splits a cleaned path into its segments; "." has none.
func splitClean(p string) []string {
	if p == "." {
		return nil
	}
	return strings.Split(p, "/")
}

// Glob is a compiled pattern over workspace-relative paths. Make one with
// [ParseGlob]; the zero Glob matches only the workspace root ".".
//
// A pattern is matched segment by segment against a path cleaned with
// [CleanPath]:
//
//	**   a whole segment: any number of segments, including none
//	*    any run of characters within one segment (never a "/")
//	?    exactly one character (one UTF-8 sequence) within a segment
//
// Every other character, "[" and "{" included, stands for itself; there
// is no escaping. "**" must be a whole segment. Names that begin with "."
// are not special: "*" matches ".env". So "project/**" matches "project"
// itself and everything under it, "*.go" matches "a.go" but not "x/a.go",
// "**/*.go" matches every .go file, and "**" matches every path and the
// root.
type Glob struct {
	pattern string   // cleaned
	segs    []string // segments of pattern; nil for "."
}

// ParseGlob compiles pattern. It refuses what [CleanPath] refuses, with an
// error wrapping [ErrBadPath], and a segment that holds "**" next to other
// characters. The pattern is cleaned first, and runs of "**" segments are
// folded into one; [Glob.String] returns the result.
func ParseGlob(pattern string) (Glob, error) {
	p, err := CleanPath(pattern)
	if err != nil {
		return Glob{}, err
	}
	var segs []string
	for _, s := range splitClean(p) {
		if s != "**" && strings.Contains(s, "**") {
			return Glob{}, fmt.Errorf("%w: %q: \"**\" must be a whole segment", ErrBadPath, pattern)
		}
		if s == "**" && len(segs) > 0 && segs[len(segs)-1] == "**" {
			continue
		}
		segs = append(segs, s)
	}
	if len(segs) == 0 {
		return Glob{pattern: "."}, nil
	}
	return Glob{pattern: strings.Join(segs, "/"), segs: segs}, nil
}

// String returns the cleaned pattern.
func (g Glob) String() string {
	if g.pattern == "" {
		return "."
	}
	return g.pattern
}

// Match reports whether p matches g. A path [CleanPath] refuses matches
// nothing.
func (g Glob) Match(p string) bool {
	c, err := CleanPath(p)
	if err != nil {
		return false
	}
	return matchSegs(g.segs, splitClean(c))
}

// MayMatchUnder reports whether some path strictly below the directory dir
// could match g. It is exact for the pattern alone and is meant to prune a
// walk: a false answer means no file under dir can match. A dir
// [CleanPath] refuses gives false.
func (g Glob) MayMatchUnder(dir string) bool {
	c, err := CleanPath(dir)
	if err != nil {
		return false
	}
	pat := g.segs
	// states[i]: the first i pattern segments have consumed the path so
	// far.
	states := make([]bool, len(pat)+1)
	next := make([]bool, len(pat)+1)
	states[0] = true
	closeStars(pat, states)
	for _, name := range splitClean(c) {
		clear(next)
		for i, on := range states {
			if !on || i == len(pat) {
				continue
			}
			if pat[i] == "**" {
				next[i] = true
			} else if matchSeg(pat[i], name) {
				next[i+1] = true
			}
		}
		closeStars(pat, next)
		states, next = next, states
	}
	for i, on := range states {
		if on && i < len(pat) {
			return true
		}
	}
	return false
}

// closeStars adds to states every position reachable by letting "**"
// segments match nothing.
func closeStars(pat []string, states []bool) {
	for i := range pat {
		if states[i] && pat[i] == "**" {
			states[i+1] = true
		}
	}
}

// matchSegs matches path segments against pattern segments, "**" standing
// for any run of segments. It is the classic wildcard algorithm: on a
// mismatch, only the last "**" seen needs to take one more segment.
func matchSegs(pat, name []string) bool {
	pi, ni := 0, 0
	starP, starN := -1, 0
	for ni < len(name) {
		switch {
		case pi < len(pat) && pat[pi] == "**":
			starP, starN = pi, ni
			pi++
		case pi < len(pat) && matchSeg(pat[pi], name[ni]):
			pi++
			ni++
		case starP >= 0:
			starN++
			pi, ni = starP+1, starN
		default:
			return false
		}
	}
	for pi < len(pat) && pat[pi] == "**" {
		pi++
	}
	return pi == len(pat)
}

// matchSeg matches one segment against one pattern segment: "*" any run of
// characters, "?" one character, anything else itself. A character is one
// UTF-8 sequence, or one byte where the name is not valid UTF-8.
func matchSeg(pat, name string) bool {
	pi, ni := 0, 0
	starP, starN := -1, 0
	for ni < len(name) {
		_, nw := utf8.DecodeRuneInString(name[ni:])
		if pi < len(pat) {
			_, pw := utf8.DecodeRuneInString(pat[pi:])
			switch c := pat[pi]; {
			case c == '*':
				starP, starN = pi, ni
				pi++
				continue
			case c == '?':
				pi++
				ni += nw
				continue
			case pat[pi:pi+pw] == name[ni:ni+nw]:
				pi += pw
				ni += nw
				continue
			}
		}
		if starP < 0 {
			return false
		}
		_, sw := utf8.DecodeRuneInString(name[starN:])
		starN += sw
		pi, ni = starP+1, starN
	}
	for pi < len(pat) && pat[pi] == '*' {
		pi++
	}
	return pi == len(pat)
}

// globCovers reports whether h matches every path g matches. A true answer
// is a proof; a false one may be conservative: "**/*" does cover "*/**",
// but globCovers says no. Callers use it to refuse widening, so erring
// towards false is the safe side.
func globCovers(h, g Glob) bool {
	memo := map[[2]int]bool{}
	var rec func(i, j int) bool
	rec = func(i, j int) bool {
		k := [2]int{i, j}
		if v, ok := memo[k]; ok {
			return v
		}
		var r bool
		switch {
		case i == len(h.segs):
			r = j == len(g.segs)
		case h.segs[i] == "**":
			// h's "**" matches nothing, or absorbs g's next segment
			// (whatever it matches, a run of segments).
			r = rec(i+1, j) || (j < len(g.segs) && rec(i, j+1))
		case j == len(g.segs) || g.segs[j] == "**":
			r = false
		default:
			r = segCovers(h.segs[i], g.segs[j]) && rec(i+1, j+1)
		}
		memo[k] = r
		return r
	}
	return rec(0, 0)
}

// segCovers reports whether the segment pattern h matches every name the
// segment pattern g matches, by the same reasoning as globCovers on
// characters.
func segCovers(h, g string) bool {
	hs, gs := chars(h), chars(g)
	memo := map[[2]int]bool{}
	var rec func(i, j int) bool
	rec = func(i, j int) bool {
		k := [2]int{i, j}
		if v, ok := memo[k]; ok {
			return v
		}
		var r bool
		switch {
		case i == len(hs):
			r = j == len(gs)
		case hs[i] == "*":
			r = rec(i+1, j) || (j < len(gs) && rec(i, j+1))
		case j == len(gs) || gs[j] == "*":
			r = false
		case hs[i] == "?":
			r = rec(i+1, j+1)
		default:
			r = hs[i] == gs[j] && rec(i+1, j+1)
		}
		memo[k] = r
		return r
	}
	return rec(0, 0)
}

func chars(s string) []string {
	out := make([]string, 0, len(s))
	for len(s) > 0 {
		_, w := utf8.DecodeRuneInString(s)
		out = append(out, s[:w])
		s = s[w:]
	}
	return out
}

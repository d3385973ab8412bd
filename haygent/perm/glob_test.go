package perm

import (
	"errors"
	"testing"
)

func TestGlobMatch(t *testing.T) {
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"project/**", "project/a/b.go", true},
		{"project/**", "project/a.go", true},
		{"project/**", "project", true},
		{"project/**", "project/", true},
		{"project/**", "projects/a.go", false},
		{"project/**", ".", false},
		{"project/**", "other/project/a.go", false},
		{"*.go", "a.go", true},
		{"*.go", "x/a.go", false},
		{"*.go", ".go", true},
		{"*", ".env", true},
		{"*", ".", false},
		{"**", ".", true},
		{"**", "a/b/c", true},
		{".", ".", true},
		{".", "a", false},
		{"**/*.pem", "k.pem", true},
		{"**/*.pem", "a/b/k.pem", true},
		{"**/*.pem", "a/b/k.pem.bak", false},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/x/y/c", false},
		{"a/**/b/**", "a/x/b/y/b/z", true},
		{"a/*/c", "a/b/c", true},
		{"a/*/c", "a/b/x/c", false},
		{"?.go", "a.go", true},
		{"?.go", "ab.go", false},
		{"?.go", "é.go", true}, // one character, two bytes
		{"a?c", "a/c", false},
		{"*a*b*", "xxaxxbxx", true},
		{"*a*b*", "xxbxxaxx", false},
		{"[a].go", "[a].go", true},
		{"[a].go", "a.go", false},
		{"project/./a.go", "project/a.go", true},
		{"project/a.go", "./project//a.go", true},
		{"project/**/**/a", "project/a", true},
		// Refused paths match nothing, whatever the pattern.
		{"**", "../x", false},
		{"**", "/etc/passwd", false},
		{"**", "a/../../x", false},
		{"**", "a/../b", false},
		{"**", `a\b`, false},
		{"**", "a\x00b", false},
		{"**", "", false},
	}
	for _, tt := range tests {
		g, err := ParseGlob(tt.pattern)
		if err != nil {
			t.Fatalf("ParseGlob(%q): %v", tt.pattern, err)
		}
		if got := g.Match(tt.path); got != tt.want {
			t.Errorf("ParseGlob(%q).Match(%q) = %v, want %v", tt.pattern, tt.path, got, tt.want)
		}
	}
}

func TestParseGlobRefuses(t *testing.T) {
	for _, p := range []string{
		"", "/etc/passwd", "../x", "a/../../x", "a/../b", "..", `a\b`, "a\x00b",
		"a**", "**b/c", "a/x**y",
	} {
		if g, err := ParseGlob(p); err == nil || !errors.Is(err, ErrBadPath) {
			t.Errorf("ParseGlob(%q) = %v, %v; want ErrBadPath", p, g, err)
		}
	}
}

func TestParseGlobString(t *testing.T) {
	for in, want := range map[string]string{
		"project/":         "project",
		"./project//a":     "project/a",
		"a/**/**/b":        "a/**/b",
		".":                ".",
		"./":               ".",
		"**/./*.go":        "**/*.go",
		"project/**/":      "project/**",
		"a/./b/.":          "a/b",
		"unicode/é/?":      "unicode/é/?",
		"spaces in/names*": "spaces in/names*",
	} {
		g, err := ParseGlob(in)
		if err != nil {
			t.Fatalf("ParseGlob(%q): %v", in, err)
		}
		if g.String() != want {
			t.Errorf("ParseGlob(%q).String() = %q, want %q", in, g.String(), want)
		}
	}
	if (Glob{}).String() != "." || !(Glob{}).Match(".") || (Glob{}).Match("a") {
		t.Error("zero Glob is not the root pattern")
	}
}

func TestCleanPath(t *testing.T) {
	for in, want := range map[string]string{
		".": ".", "./": ".", "a/./b/": "a/b", "a//b": "a/b", "project": "project",
	} {
		got, err := CleanPath(in)
		if err != nil || got != want {
			t.Errorf("CleanPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "/", "/etc/passwd", "..", "../x", "a/../../x", "a/..", `a\b`, "\x00"} {
		if _, err := CleanPath(in); !errors.Is(err, ErrBadPath) {
			t.Errorf("CleanPath(%q) err = %v, want ErrBadPath", in, err)
		}
	}
}

func TestMayMatchUnder(t *testing.T) {
	tests := []struct {
		pattern, dir string
		want         bool
	}{
		{"project/**", ".", true},
		{"project/**", "project", true},
		{"project/**", "project/a/b", true},
		{"project/**", "other", false},
		{"project/a.go", "project", true},
		{"project/a.go", "project/a.go", false},
		{"project", "project", false},
		{"*.go", ".", true},
		{"*.go", "x", false},
		{"**/*.go", "x/y", true},
		{"a/*/c", "a/b", true},
		{"a/*/c", "a/b/c", false},
		{"**", "anything", true},
		{".", ".", false},
		{"**", "../x", false},
	}
	for _, tt := range tests {
		g, err := ParseGlob(tt.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.MayMatchUnder(tt.dir); got != tt.want {
			t.Errorf("%q.MayMatchUnder(%q) = %v, want %v", tt.pattern, tt.dir, got, tt.want)
		}
	}
}

func TestGlobCovers(t *testing.T) {
	tests := []struct {
		h, g string
		want bool
	}{
		{"project/**", "project/a/**", true},
		{"project/**", "project/*.go", true},
		{"project/**", "project", true},
		{"project/**", "**", false},
		{"project/a/**", "project/**", false},
		{"**", "anything/**/at/*.all", true},
		{"*.go", "a.go", true},
		{"*.go", "*_test.go", true},
		{"*_test.go", "*.go", false},
		{"?.go", "a.go", true},
		{"a.go", "?.go", false},
		{"*", "?", true},
		{"?", "*", false},
		{"a/*/c", "a/b/c", true},
		{"a/*/c", "a/**/c", false},
		{"**/*.pem", "x/y.pem", true},
		{"**/*.pem", "**/k.pem", true},
	}
	for _, tt := range tests {
		h, err1 := ParseGlob(tt.h)
		g, err2 := ParseGlob(tt.g)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if got := globCovers(h, g); got != tt.want {
			t.Errorf("globCovers(%q, %q) = %v, want %v", tt.h, tt.g, got, tt.want)
		}
	}
}

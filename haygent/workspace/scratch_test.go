package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/haygent/hg/haygent/perm"
)

func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// files returns every entry under dir (slash paths), with content for
// regular files and "->target" for links.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "->" + target
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func srcTree(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	tree(t, src, map[string]string{
		"project/a.go":          "package a",
		"project/sub/b.go":      "package b",
		"project/.env":          "TOKEN=1",
		"project/keys/k.pem":    "key",
		"project/out/old.txt":   "old",
		"project/out/other.txt": "other",
		"generated/keep.txt":    "keep",
		"generated/gen.go":      "gen",
		"README.md":             "readme",
		"vendor/v.go":           "vendor",
	})
	if err := os.Chmod(filepath.Join(src, "project/sub/b.go"), 0o755); err != nil {
		t.Fatal(err)
	}
	return src
}

func TestScratch(t *testing.T) {
	src := srcTree(t)
	secretFile := outside(t)
	symlink(t, secretFile, filepath.Join(src, "project/abs-link"))
	symlink(t, "../../"+filepath.Base(filepath.Dir(secretFile))+"/secret.txt", filepath.Join(src, "project/rel-link"))
	symlink(t, filepath.Dir(secretFile), filepath.Join(src, "project/dir-link"))
	symlink(t, "a.go", filepath.Join(src, "project/inside-link"))
	symlink(t, secretFile, filepath.Join(src, "vendor/link")) // not readable: not recorded

	dst := filepath.Join(t.TempDir(), "scratch")
	m, err := Scratch(src, testSet(t), dst)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"project/a.go":          "package a",
		"project/sub/b.go":      "package b",
		"project/out/old.txt":   "old",
		"project/out/other.txt": "other",
		"generated/keep.txt":    "keep",
		"generated/gen.go":      "gen",
	}
	got := files(t, dst)
	if !maps.Equal(got, want) {
		t.Errorf("scratch holds %q,\nwant %q", got, want)
	}
	for p, c := range got {
		if strings.Contains(c, secret) {
			t.Errorf("%s holds the secret", p)
		}
	}
	if len(m.Files) != len(want) {
		t.Errorf("manifest has %d files, want %d", len(m.Files), len(want))
	}
	for p, c := range want {
		st := m.Files[p]
		if st.Digest != digest(c) || st.Size != int64(len(c)) {
			t.Errorf("manifest %s = %+v", p, st)
		}
	}
	if m.Files["project/sub/b.go"].Mode != 0o755 || m.Files["project/a.go"].Mode != 0o644 {
		t.Errorf("modes: %v %v", m.Files["project/sub/b.go"].Mode, m.Files["project/a.go"].Mode)
	}
	if fi, _ := os.Stat(filepath.Join(dst, "project/sub/b.go")); fi.Mode().Perm() != 0o755 {
		t.Errorf("copied mode %v", fi.Mode())
	}
	wantSkipped := map[string]string{
		"project/abs-link": "symlink", "project/rel-link": "symlink",
		"project/dir-link": "symlink", "project/inside-link": "symlink",
	}
	if !maps.Equal(m.Skipped, wantSkipped) {
		t.Errorf("Skipped = %v, want %v", m.Skipped, wantSkipped)
	}
	if _, err := os.Stat(filepath.Join(dst, "vendor")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("scratch made a directory no grant reaches")
	}

	// dst may lie inside src: it is not copied into itself.
	inner := filepath.Join(src, "project", "scratch")
	m2, err := Scratch(src, testSet(t), inner)
	if err != nil {
		t.Fatal(err)
	}
	if len(m2.Files) != len(want) || !maps.Equal(files(t, inner), want) {
		t.Errorf("scratch inside src: %v", m2.Files)
	}
	os.RemoveAll(inner)

	// dst must be empty.
	if _, err := Scratch(src, testSet(t), dst); err == nil {
		t.Error("Scratch into a non-empty directory succeeded")
	}
	// An existing empty directory is fine; a nil set copies nothing.
	empty := t.TempDir()
	m, err = Scratch(src, nil, empty)
	if err != nil || len(m.Files) != 0 || len(files(t, empty)) != 0 {
		t.Errorf("Scratch with no grants: %v, %v", m, err)
	}
}

func TestDiff(t *testing.T) {
	src := srcTree(t)
	scratch := filepath.Join(t.TempDir(), "s")
	m, err := Scratch(src, testSet(t), scratch)
	if err != nil {
		t.Fatal(err)
	}
	if ch, err := Diff(m, scratch); err != nil || len(ch) != 0 {
		t.Fatalf("Diff of an untouched scratch = %v, %v", ch, err)
	}
	s := func(p string) string { return filepath.Join(scratch, filepath.FromSlash(p)) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(s("project/a.go"), []byte("package a // changed"), 0o644))
	must(os.Remove(s("project/out/old.txt")))
	must(os.WriteFile(s("project/new.go"), []byte("package new"), 0o600))
	must(os.Chmod(s("generated/gen.go"), 0o755))
	must(os.Symlink("/etc/passwd", s("project/evil")))
	must(os.Remove(s("generated/keep.txt")))
	must(os.Symlink("../project/a.go", s("generated/keep.txt")))
	must(os.Remove(s("project/sub/b.go")))
	must(os.Mkdir(s("project/sub/b.go"), 0o755))
	must(os.WriteFile(s("project/sub/b.go/inner"), []byte("inner"), 0o644))
	must(os.Mkdir(s("emptydir"), 0o755))

	ch, err := Diff(m, scratch)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		kind   ChangeKind
		path   string
		before bool
		after  string
		target string
	}
	var got []row
	for _, c := range ch {
		r := row{kind: c.Kind, path: c.Path, before: c.Before != nil, target: c.Target}
		if c.After != nil {
			r.after = c.After.Digest
		}
		got = append(got, r)
	}
	want := []row{
		{Modify, "generated/gen.go", true, digest("gen"), ""},
		{Symlink, "generated/keep.txt", true, "", "../project/a.go"},
		{Modify, "project/a.go", true, digest("package a // changed"), ""},
		{Symlink, "project/evil", false, "", "/etc/passwd"},
		{Create, "project/new.go", false, digest("package new"), ""},
		{Delete, "project/out/old.txt", true, "", ""},
		{Delete, "project/sub/b.go", true, "", ""},
		{Create, "project/sub/b.go/inner", false, digest("inner"), ""},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Diff:\n got %+v\nwant %+v", got, want)
	}
	for _, c := range ch {
		if c.Path == "generated/gen.go" && (c.Before.Mode != 0o644 || c.After.Mode != 0o755) {
			t.Errorf("mode change: %+v → %+v", c.Before, c.After)
		}
		if c.Path == "project/new.go" && c.After.Mode != 0o600 {
			t.Errorf("new file mode %v", c.After.Mode)
		}
	}
}

// step makes a scratch copy of src, lets fn change it, and returns the
// scratch directory and its changes.
func step(t *testing.T, src string, set *perm.Set, fn func(s func(string) string)) (string, Changes) {
	t.Helper()
	scratch := filepath.Join(t.TempDir(), "s")
	m, err := Scratch(src, set, scratch)
	if err != nil {
		t.Fatal(err)
	}
	fn(func(p string) string { return filepath.Join(scratch, filepath.FromSlash(p)) })
	ch, err := Diff(m, scratch)
	if err != nil {
		t.Fatal(err)
	}
	return scratch, ch
}

func TestApply(t *testing.T) {
	src := srcTree(t)
	set := testSet(t)
	secretFile := outside(t)
	before := files(t, src)
	scratch, ch := step(t, src, set, func(s func(string) string) {
		os.WriteFile(s("project/out/old.txt"), []byte("old, updated"), 0o644) // allowed
		os.Chmod(s("project/out/old.txt"), 0o600)
		os.MkdirAll(s("project/out/deep"), 0o755)
		os.WriteFile(s("project/out/deep/new.txt"), []byte("deep"), 0o644) // allowed, new dirs
		os.WriteFile(s("generated/gen.go"), []byte("regenerated"), 0o644)  // allowed
		os.WriteFile(s("generated/fresh.go"), []byte("fresh"), 0o644)      // allowed
		os.WriteFile(s("generated/.env"), []byte("not read, but writable"), 0o644)
		os.WriteFile(s("project/a.go"), []byte("package a // edited"), 0o644) // no grant
		os.WriteFile(s("README.md"), []byte("rewritten"), 0o644)              // no grant
		os.WriteFile(s("generated/keep.txt"), []byte("changed"), 0o644)       // deny entry
		os.Remove(s("project/sub/b.go"))                                      // delete, no grant
		os.Remove(s("project/out/other.txt"))                                 // delete, allowed
		os.Symlink(secretFile, s("generated/link"))                           // symlink: always denied
		os.WriteFile(s("../escape"), []byte("x"), 0o644)                      // outside scratch: not seen
	})
	applied, denied, err := Apply(ch, scratch, src, set)
	if err != nil {
		t.Fatal(err)
	}
	var appliedPaths []string
	for _, c := range applied {
		appliedPaths = append(appliedPaths, string(c.Kind)+" "+c.Path)
	}
	wantApplied := []string{
		"delete project/out/other.txt",
		"create generated/.env",
		"create generated/fresh.go",
		"modify generated/gen.go",
		"create project/out/deep/new.txt",
		"modify project/out/old.txt",
	}
	if !slices.Equal(appliedPaths, wantApplied) {
		t.Errorf("applied %q,\nwant %q", appliedPaths, wantApplied)
	}
	wantDenied := []perm.Denial{
		{Op: perm.Op{Verb: "write", Kind: "file", Target: "README.md"}, Rule: perm.RuleDefault},
		{Op: perm.Op{Verb: "write", Kind: "file", Target: "generated/keep.txt"}, Rule: "write:file:generated/keep.txt"},
		{Op: perm.Op{Verb: "write", Kind: "file", Target: "generated/link"}, Rule: RuleSymlink},
		{Op: perm.Op{Verb: "write", Kind: "file", Target: "project/a.go"}, Rule: perm.RuleDefault},
		{Op: perm.Op{Verb: "delete", Kind: "file", Target: "project/sub/b.go"}, Rule: perm.RuleDefault},
	}
	if !slices.Equal(denied, wantDenied) {
		t.Errorf("denied %+v,\nwant %+v", denied, wantDenied)
	}

	after := files(t, src)
	want := maps.Clone(before)
	want["project/out/old.txt"] = "old, updated"
	want["project/out/deep/new.txt"] = "deep"
	want["generated/gen.go"] = "regenerated"
	want["generated/fresh.go"] = "fresh"
	want["generated/.env"] = "not read, but writable"
	delete(want, "project/out/other.txt")
	if !maps.Equal(after, want) {
		t.Errorf("workspace after Apply:\n got %q\nwant %q", after, want)
	}
	if fi, _ := os.Stat(filepath.Join(src, "project/out/old.txt")); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode not applied: %v", fi.Mode())
	}
	if b, _ := os.ReadFile(secretFile); string(b) != secret {
		t.Error("outside file changed")
	}
	assertNoTemp(t, src)
}

func TestApplyDeletePrunesDirectories(t *testing.T) {
	src := t.TempDir()
	tree(t, src, map[string]string{"out/a/b/c.txt": "c", "out/keep/k.txt": "k"})
	set := mustSet(t, []string{"read:file:out/**", "write:file:out/**"}, nil)
	scratch, ch := step(t, src, set, func(s func(string) string) {
		os.RemoveAll(s("out/a"))
		os.Remove(s("out/keep/k.txt"))
		os.Remove(s("out/keep"))
		os.WriteFile(s("out/keep"), []byte("now a file"), 0o644)
	})
	if _, _, err := Apply(ch, scratch, src, set); err != nil {
		t.Fatal(err)
	}
	got := files(t, src)
	if !maps.Equal(got, map[string]string{"out/keep": "now a file"}) {
		t.Errorf("after Apply: %q", got)
	}
	if _, err := os.Stat(filepath.Join(src, "out/a")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("emptied directory out/a not removed")
	}

	// The other way round: a file becomes a directory.
	scratch, ch = step(t, src, set, func(s func(string) string) {
		os.Remove(s("out/keep"))
		os.MkdirAll(s("out/keep/x"), 0o755)
		os.WriteFile(s("out/keep/x/y"), []byte("y"), 0o644)
	})
	if _, _, err := Apply(ch, scratch, src, set); err != nil {
		t.Fatal(err)
	}
	if got := files(t, src); !maps.Equal(got, map[string]string{"out/keep/x/y": "y"}) {
		t.Errorf("after Apply: %q", got)
	}
}

func TestApplyConflict(t *testing.T) {
	src := srcTree(t)
	set := testSet(t)
	scratch, ch := step(t, src, set, func(s func(string) string) {
		os.WriteFile(s("generated/gen.go"), []byte("from the step"), 0o644)
		os.WriteFile(s("generated/fresh.go"), []byte("fresh"), 0o644)
		os.Remove(s("project/out/other.txt"))
	})
	// Meanwhile the real workspace changes.
	tree(t, src, map[string]string{"generated/gen.go": "edited by someone else", "project/out/other.txt": "edited too"})
	applied, _, err := Apply(ch, scratch, src, set)
	var ce *ConflictError
	if !errors.Is(err, ErrConflict) || !errors.As(err, &ce) || len(applied) != 0 {
		t.Fatalf("Apply = %v, %v; want conflicts and nothing applied", applied, err)
	}
	if !strings.Contains(err.Error(), "generated/gen.go") || !strings.Contains(err.Error(), "project/out/other.txt") {
		t.Errorf("conflict error names not every path: %v", err)
	}
	got := files(t, src)
	if got["generated/gen.go"] != "edited by someone else" || got["project/out/other.txt"] != "edited too" {
		t.Errorf("conflicting files changed: %q", got)
	}
	if _, ok := got["generated/fresh.go"]; ok {
		t.Error("a change was applied despite the conflict")
	}
}

func TestApplyRefusesBadChanges(t *testing.T) {
	src := srcTree(t)
	set := testSet(t)
	scratch := t.TempDir()
	tree(t, scratch, map[string]string{"generated/x": "x"})
	st := &FileState{Digest: digest("x"), Size: 1, Mode: 0o644}
	for name, ch := range map[string]Changes{
		"create without after": {{Kind: Create, Path: "generated/x"}},
		"unknown kind":         {{Kind: "rename", Path: "generated/x"}},
		"twice":                {{Kind: Create, Path: "generated/x", After: st}, {Kind: Create, Path: "./generated/x", After: st}},
	} {
		if _, _, err := Apply(ch, scratch, src, set); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// Paths that leave the workspace are denied, never applied.
	ch := Changes{
		{Kind: Create, Path: "../escape", After: st},
		{Kind: Create, Path: "/abs", After: st},
		{Kind: Delete, Path: "generated/../../x", Before: st},
	}
	applied, denied, err := Apply(ch, scratch, src, set)
	if err != nil || len(applied) != 0 || len(denied) != 3 {
		t.Fatalf("Apply = %v, %v, %v", applied, denied, err)
	}
	for _, d := range denied {
		if !strings.HasPrefix(d.Rule, perm.RuleInvalid) {
			t.Errorf("denial %+v", d)
		}
	}
	// A scratch file that no longer has the digest Diff saw is not copied.
	bad := Changes{{Kind: Create, Path: "generated/x", After: &FileState{Digest: digest("y"), Size: 1, Mode: 0o644}}}
	if applied, _, err := Apply(bad, scratch, src, set); err == nil || len(applied) != 0 {
		t.Errorf("Apply of a changed scratch file = %v, %v", applied, err)
	}
	if _, err := os.Stat(filepath.Join(src, "generated/x")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("file written despite the digest mismatch")
	}
	assertNoTemp(t, src)
}

func TestApplyThroughSymlinkInWorkspace(t *testing.T) {
	src := t.TempDir()
	out := t.TempDir()
	tree(t, src, map[string]string{"gen/a": "a"})
	set := mustSet(t, []string{"read:file:gen/**", "write:file:gen/**"}, nil)
	scratch, ch := step(t, src, set, func(s func(string) string) {
		os.MkdirAll(s("gen/sub"), 0o755)
		os.WriteFile(s("gen/sub/f"), []byte("f"), 0o644)
	})
	// After the copy, gen/sub in the workspace becomes a link outside.
	symlink(t, out, filepath.Join(src, "gen/sub"))
	applied, denied, err := Apply(ch, scratch, src, set)
	if err != nil || len(applied) != 0 || len(denied) != 1 || denied[0].Rule != RuleSymlink {
		t.Fatalf("Apply = %v, %v, %v", applied, denied, err)
	}
	if len(files(t, out)) != 0 {
		t.Error("Apply wrote through a link")
	}
}

package workspace

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/haygent/hg/haygent/perm"
)

const secret = "TOP-SECRET-outside-the-workspace"

func mustSet(t *testing.T, grants, deny []string) *perm.Set {
	t.Helper()
	s, err := perm.New(grants, deny, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tree writes files (path → content) under dir.
func tree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symlinks unavailable: %v", err)
	}
}

// outside makes a directory beside the workspace holding a secret file,
// and returns the file's path.
func outside(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(p, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func testSet(t *testing.T) *perm.Set {
	return mustSet(t,
		[]string{"read:file:project/**", "read:file:generated/**", "write:file:generated/**", "write:file:project/out/**"},
		[]string{"read:file:project/.env", "read:file:**/*.pem", "write:file:generated/keep.txt"})
}

func isDenied(err error, rule string) bool {
	var de *perm.DeniedError
	return errors.Is(err, perm.ErrDenied) && errors.As(err, &de) && strings.HasPrefix(de.Rule, rule)
}

func TestWorkspaceReadWrite(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{
		"project/a.go":     "package a",
		"project/.env":     "TOKEN=1",
		"project/k.pem":    "key",
		"README.md":        "readme",
		"generated/old.go": "old",
	})
	w, err := Open(dir, testSet(t))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	if b, err := w.ReadFile("project/a.go"); err != nil || string(b) != "package a" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
	if b, err := w.ReadFile("./project//a.go"); err != nil || string(b) != "package a" {
		t.Fatalf("ReadFile unclean = %q, %v", b, err)
	}
	if _, err := w.ReadFile("project"); err == nil || errors.Is(err, perm.ErrDenied) {
		t.Fatalf("ReadFile of a directory: %v", err)
	}
	if _, err := w.ReadFile("project/missing.go"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadFile missing: %v", err)
	}
	denials := []struct {
		rel, rule string
	}{
		{"project/.env", "read:file:project/.env"},
		{"project/k.pem", "read:file:**/*.pem"},
		{"README.md", perm.RuleDefault},
		{"../x", perm.RuleInvalid},
		{"/etc/passwd", perm.RuleInvalid},
		{"project/../../x", perm.RuleInvalid},
		{"a/../../x", perm.RuleInvalid},
		{`project\a.go`, perm.RuleInvalid},
		{"project/a.go\x00", perm.RuleInvalid},
		{"", perm.RuleInvalid},
	}
	for _, d := range denials {
		b, err := w.ReadFile(d.rel)
		if b != nil || !isDenied(err, d.rule) {
			t.Errorf("ReadFile(%q) = %q, %v; want denied by %q", d.rel, b, err, d.rule)
		}
		if _, err := w.Stat(d.rel); !isDenied(err, d.rule) {
			t.Errorf("Stat(%q): %v; want denied by %q", d.rel, err, d.rule)
		}
	}
	if got := w.Denials(); len(got) != 2*len(denials) {
		t.Fatalf("%d denials recorded, want %d: %v", len(got), 2*len(denials), got)
	} else if got[0] != (perm.Denial{Op: perm.Op{Verb: "read", Kind: "file", Target: "project/.env"}, Rule: "read:file:project/.env"}) {
		t.Errorf("first denial = %+v", got[0])
	}

	// Writes.
	if err := w.WriteFile("generated/x/y.go", []byte("new"), 0o640); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "generated/x/y.go")); string(b) != "new" {
		t.Fatalf("written %q", b)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "generated/x/y.go")); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", fi.Mode())
	}
	if err := w.WriteFile("generated/old.go", []byte("replaced"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "generated/old.go")); string(b) != "replaced" {
		t.Fatalf("rewritten %q", b)
	}
	for rel, rule := range map[string]string{
		"project/a.go":        perm.RuleDefault,
		"generated/keep.txt":  "write:file:generated/keep.txt",
		"../escape":           perm.RuleInvalid,
		"generated/../../esc": perm.RuleInvalid,
		"/abs":                perm.RuleInvalid,
	} {
		if err := w.WriteFile(rel, []byte("x"), 0o644); !isDenied(err, rule) {
			t.Errorf("WriteFile(%q): %v; want denied by %q", rel, err, rule)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "project/a.go")); string(b) != "package a" {
		t.Fatalf("denied write changed the file: %q", b)
	}
	if err := w.WriteFile("generated/setuid", []byte("x"), 0o4755); err == nil || errors.Is(err, perm.ErrDenied) {
		t.Errorf("WriteFile with setuid bit: %v", err)
	}

	// Removal.
	if err := w.Remove("project/a.go"); !isDenied(err, perm.RuleDefault) {
		t.Errorf("Remove denied: %v", err)
	}
	if err := w.Remove("generated/old.go"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "generated/old.go")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("removed file still there")
	}
	assertNoTemp(t, dir)
}

func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), tmpPrefix) {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
}

func TestWorkspaceSymlinks(t *testing.T) {
	dir := t.TempDir()
	secretFile := outside(t)
	tree(t, dir, map[string]string{
		"project/a.go": "package a",
		"project/.env": "TOKEN=1",
		"generated/g":  "g",
	})
	symlink(t, secretFile, filepath.Join(dir, "project/abs"))
	symlink(t, "../../../../../../../../"+secretFile, filepath.Join(dir, "project/rel"))
	symlink(t, ".env", filepath.Join(dir, "project/env")) // inside, to a denied file
	symlink(t, filepath.Dir(secretFile), filepath.Join(dir, "project/outdir"))
	symlink(t, ".", filepath.Join(dir, "project/self"))
	symlink(t, filepath.Dir(secretFile), filepath.Join(dir, "generated/outdir"))

	w, err := Open(dir, testSet(t))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, rel := range []string{"project/abs", "project/rel", "project/env", "project/outdir/secret.txt", "project/self/a.go", "project/self/.env"} {
		b, err := w.ReadFile(rel)
		if err == nil || bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("TOKEN")) {
			t.Errorf("ReadFile(%q) = %q, %v", rel, b, err)
		}
		if !isDenied(err, RuleSymlink) {
			t.Errorf("ReadFile(%q): %v, want denied by %q", rel, err, RuleSymlink)
		}
	}
	fi, err := w.Stat("project/abs")
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("Stat of a link = %v, %v", fi, err)
	}
	if _, err := w.Stat("project/outdir/secret.txt"); !isDenied(err, RuleSymlink) {
		t.Errorf("Stat through a link: %v", err)
	}
	// Writing through a link to a directory outside is denied and writes
	// nothing there; writing at a link replaces the link, not its target.
	if err := w.WriteFile("generated/outdir/secret.txt", []byte("pwned"), 0o644); !isDenied(err, RuleSymlink) {
		t.Errorf("WriteFile through a link: %v", err)
	}
	symlink(t, secretFile, filepath.Join(dir, "generated/link"))
	if err := w.WriteFile("generated/link", []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(secretFile); string(b) != secret {
		t.Fatalf("outside file changed: %q", b)
	}
	if fi, _ := os.Lstat(filepath.Join(dir, "generated/link")); !fi.Mode().IsRegular() {
		t.Errorf("link not replaced by a file: %v", fi.Mode())
	}
	if err := w.Remove("generated/outdir/secret.txt"); !isDenied(err, RuleSymlink) {
		t.Errorf("Remove through a link: %v", err)
	}
	if _, err := os.Stat(secretFile); err != nil {
		t.Fatal("outside file removed")
	}
	if _, err := w.List("project/outdir"); !isDenied(err, RuleSymlink) {
		t.Errorf("List through a link: %v", err)
	}
}

func TestWorkspaceList(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{
		"project/a.go":       "a",
		"project/sub/b.go":   "b",
		"project/.env":       "e",
		"project/sub/k.pem":  "k",
		"README.md":          "r",
		"vendor/x/y.go":      "v",
		"generated/keep.txt": "g",
	})
	symlink(t, outside(t), filepath.Join(dir, "project/link"))
	w, err := Open(dir, testSet(t))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	got, err := w.List(".")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"generated/keep.txt", "project/a.go", "project/sub/b.go"}
	if !slices.Equal(got, want) {
		t.Errorf("List(.) = %q, want %q", got, want)
	}
	if got, _ := w.List("project/sub"); !slices.Equal(got, []string{"project/sub/b.go"}) {
		t.Errorf("List(project/sub) = %q", got)
	}
	if _, err := w.List("../"); !isDenied(err, perm.RuleInvalid) {
		t.Errorf("List(../): %v", err)
	}
	if len(w.Denials()) != 1 {
		t.Errorf("denials: %v", w.Denials())
	}
}

func TestWorkspaceConcurrent(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{"project/a.go": "a"})
	w, err := Open(dir, testSet(t))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 20 {
				w.ReadFile("project/a.go")
				w.ReadFile("project/.env")
				w.WriteFile("generated/out.txt", []byte{byte(i)}, 0o644)
				w.Denials()
			}
		})
	}
	wg.Wait()
	if n := len(w.Denials()); n != 8*20 {
		t.Errorf("%d denials, want %d", n, 8*20)
	}
	assertNoTemp(t, dir)
}

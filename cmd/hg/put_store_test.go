package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hg put -r of a directory that holds the store (the project root, as
// one runs it), another store, a directory named like a store in another
// case, or a hard link to the runner key stores none of them: a tree is
// shared (bundles, hg serve, workspaces), a key never. Each is named in a
// warning; what is left is stored and written back.
func TestPutLeavesOutStores(t *testing.T) {
	proj := t.TempDir()
	store := filepath.Join(proj, ".haygent")
	hg := func(args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"--store", store}, args...), strings.NewReader(""), &stdout, &stderr)
		return stdout.String(), stderr.String(), code
	}
	for _, args := range [][]string{{"init"}, {"key", "gen"}} {
		if out, errOut, code := hg(args...); code != 0 {
			t.Fatalf("hg %v: %d %s%s", args, code, out, errOut)
		}
	}
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(proj, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("src/main.go", "package main\n")
	write("sub/.HayGent/notes", "x\n")
	write("other/st/keys/runner.key", "hg ed25519 seed BBBB\n") // a store by its contents
	write("other/st/store.db", "")
	if err := os.Link(filepath.Join(store, "keys", "runner.key"), filepath.Join(proj, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := hg("put", "-r", proj)
	if code != 0 {
		t.Fatalf("hg put -r: %d %s", code, errOut)
	}
	for _, left := range []string{".haygent", "sub/.HayGent", "other/st", "notes.txt"} {
		if !strings.Contains(errOut, "left out "+left+":") {
			t.Errorf("no warning for %s:\n%s", left, errOut)
		}
	}
	dst := filepath.Join(t.TempDir(), "out")
	if _, errOut, code := hg("get", strings.TrimSpace(out), "-o", dst); code != 0 {
		t.Fatalf("hg get: %d %s", code, errOut)
	}
	var got []string
	err := filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dst, p)
			got = append(got, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "src/main.go" {
		t.Errorf("stored files %v, want only src/main.go", got)
	}
}

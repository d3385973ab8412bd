package haygent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent"
)

// A package is stored whole, so one that holds an hg store, by any name,
// or the store's runner key under another name is refused, as hg run
// and hg mcp store packages; a package holding neither is stored.
func TestPutPackageRefusesStores(t *testing.T) {
	base := t.TempDir()
	store := filepath.Join(base, "st")
	write := func(p, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(store, "store.db"), "db")
	write(filepath.Join(store, "keys", "runner.key"), "hg ed25519 seed")
	pkg := func(name string) string {
		t.Helper()
		dir := filepath.Join(base, name)
		if err := os.CopyFS(dir, os.DirFS("../fixtures/haygents/echo")); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	plain := pkg("plain")
	dotted := pkg("dotted")
	write(filepath.Join(dotted, ".HayGent", "store.db"), "db")
	byContents := pkg("bycontents")
	write(filepath.Join(byContents, "vendor", "st", "keys", "runner.key"), "another key")
	linked := pkg("linked")
	if err := os.Link(filepath.Join(store, "keys", "runner.key"), filepath.Join(linked, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := haygent.PutPackage(ctx, memstore.New(), plain, store); err != nil {
		t.Fatalf("a plain package: %v", err)
	}
	for _, dir := range []string{dotted, byContents, linked, store} {
		st := memstore.New()
		_, err := haygent.PutPackage(ctx, st, dir, store)
		if err == nil || !strings.Contains(err.Error(), "store") {
			t.Errorf("package %s: %v, want it refused", filepath.Base(dir), err)
		}
	}
}

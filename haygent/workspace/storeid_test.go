package workspace

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A tree stored from a directory leaves out every store in it, whatever
// its name (known by its contents), and the store's runner key under any
// other name (a hard link, known by identity); the rest is kept.
func TestKeepLeavesOutStoresAndKeys(t *testing.T) {
	base := t.TempDir()
	tree(t, base, map[string]string{
		"st/keys/runner.key":          "hg ed25519 seed",
		"st/store.db":                 "db",
		"ws/main.go":                  "package main",
		"ws/other/st/keys/runner.key": "another store's key",
		"ws/db/store.db":              "db",
		"ws/db/keys/trusted":          "ed25519:x",
		"ws/dbonly/store.db":          "a file named so, no store",
	})
	if err := os.Link(filepath.Join(base, "st/keys/runner.key"), filepath.Join(base, "ws/notes.txt")); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(base, "ws")
	f, err := NewFence(ws, filepath.Join(base, "st"))
	if err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var left []string
	keep := f.Keep(root, func(p string) { left = append(left, p) })
	for _, c := range []struct {
		p     string
		isDir bool
		want  bool
	}{
		{"main.go", false, true},
		{"notes.txt", false, false},
		{"other", true, true},
		{"other/st", true, false},
		{"db", true, false},
		{"dbonly", true, true},
		{"dbonly/store.db", false, true},
	} {
		if got := keep(c.p, c.isDir); got != c.want {
			t.Errorf("keep(%s) = %v, want %v", c.p, got, c.want)
		}
	}
	if want := []string{"notes.txt", "other/st", "db"}; !slices.Equal(left, want) {
		t.Errorf("left out %q, want %q", left, want)
	}
	// A directory that is a store itself is kept out whole.
	sub, err := os.OpenRoot(filepath.Join(ws, "other", "st"))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	left = nil
	if keep := f.Keep(sub, func(p string) { left = append(left, p) }); keep("keys", true) || !slices.Equal(left, []string{"keys"}) {
		t.Errorf("a store's own directory: keys kept, left %q", left)
	}
}

package workspace

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/haygent/hg/haygent/perm"
)

// storeRule is the rule of a denial for a path inside an hg store, as
// the receipt and the report show it.
const storeRule = "inside an hg store"

func TestRuleStoreText(t *testing.T) {
	if RuleStore != storeRule {
		t.Errorf("RuleStore is %q, want %q", RuleStore, storeRule)
	}
}

// storeTree is a workspace holding hg stores: the usual .haygent/ at the
// top, one deeper, and files whose names only look like one.
func storeTree(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	tree(t, src, map[string]string{
		".haygent/keys/runner.key":   "hg ed25519 seed c2VlZA==",
		".haygent/keys/trusted":      "ed25519:trusted\n",
		".haygent/store.db":          "db",
		"sub/dir/.haygent/store.db":  "nested db",
		"sub/dir/code.go":            "package dir",
		".haygentish/keep.txt":       "not a store",
		"x.haygent/keep.txt":         "not a store either",
		"main.go":                    "package main",
		"sub/.haygent-notes/log.txt": "not a store",
	})
	return src
}

// notStore is what storeTree holds outside its stores.
var notStore = []string{".haygentish/keep.txt", "main.go", "sub/.haygent-notes/log.txt", "sub/dir/code.go", "x.haygent/keep.txt"}

// A step granted every file never gets a copy of a store: not the one
// at the top of the workspace, not one deeper down.
func TestScratchLeavesOutStores(t *testing.T) {
	src := storeTree(t)
	set := mustSet(t, []string{"read:file:**", "write:file:**"}, nil)
	dst := filepath.Join(t.TempDir(), "s")
	m, err := Scratch(src, set, dst)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(m.Files)); !slices.Equal(got, notStore) {
		t.Errorf("manifest %q, want %q", got, notStore)
	}
	if got := slices.Sorted(maps.Keys(files(t, dst))); !slices.Equal(got, notStore) {
		t.Errorf("scratch holds %q, want %q", got, notStore)
	}
	for _, p := range []string{".haygent", "sub/dir/.haygent"} {
		if _, err := os.Lstat(filepath.Join(dst, p)); err == nil {
			t.Errorf("scratch holds %s", p)
		}
	}
}

// Whatever a step writes into a store's path in its scratch copy is
// denied, under a grant that allows every file, and the store is left as
// it was. So is a Delete or Modify nobody's Diff made.
func TestApplyDeniesStorePaths(t *testing.T) {
	src := storeTree(t)
	set := mustSet(t, []string{"read:file:**", "write:file:**"}, nil)
	before := files(t, src)
	scratch, ch := step(t, src, set, func(s func(string) string) {
		for _, p := range []string{".haygent/keys", "sub/dir/.haygent", "deep/er/.haygent/keys", ".HayGent"} {
			os.MkdirAll(s(p), 0o755)
		}
		os.WriteFile(s(".haygent/keys/trusted"), []byte("ed25519:planted\n"), 0o644)
		os.WriteFile(s(".haygent/keys/runner.key"), []byte("hg ed25519 seed cGxhbnRlZA=="), 0o600)
		os.WriteFile(s("sub/dir/.haygent/store.db"), []byte("replaced"), 0o644)
		os.WriteFile(s("deep/er/.haygent/keys/trusted"), []byte("ed25519:planted\n"), 0o644)
		os.WriteFile(s(".HayGent/trusted"), []byte("ed25519:planted\n"), 0o644)
		os.WriteFile(s("sub/.haygent"), []byte("a file by the name"), 0o644)
		os.WriteFile(s("main.go"), []byte("package main // edited"), 0o644) // allowed
		os.WriteFile(s(".haygentish/new.txt"), []byte("allowed"), 0o644)    // allowed
	})
	forged := []Change{
		{Kind: Delete, Path: ".haygent/store.db", Before: &FileState{Digest: digest("db"), Size: 2, Mode: 0o644}},
		{Kind: Modify, Path: ".haygent/keys/trusted", Before: &FileState{Digest: digest("ed25519:trusted\n"), Size: 16, Mode: 0o644},
			After: &FileState{Digest: digest("x"), Size: 1, Mode: 0o644}},
	}
	var all Changes
	for _, c := range ch {
		if c.Path != ".haygent/keys/trusted" {
			all = append(all, c)
		}
	}
	all = append(all, forged...)
	slices.SortFunc(all, func(a, b Change) int {
		switch {
		case a.Path < b.Path:
			return -1
		case a.Path > b.Path:
			return 1
		}
		return 0
	})
	applied, denied, err := Apply(all, scratch, src, set)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range applied {
		got = append(got, string(c.Kind)+" "+c.Path)
	}
	if want := []string{"create .haygentish/new.txt", "modify main.go"}; !slices.Equal(got, want) {
		t.Errorf("applied %q, want %q", got, want)
	}
	w := func(verb, p string) perm.Denial {
		return perm.Denial{Op: perm.Op{Verb: verb, Kind: perm.KindFile, Target: p}, Rule: storeRule}
	}
	wantDenied := []perm.Denial{
		w("write", ".HayGent/trusted"),
		w("write", ".haygent/keys/runner.key"),
		w("write", ".haygent/keys/trusted"),
		w("delete", ".haygent/store.db"),
		w("write", "deep/er/.haygent/keys/trusted"),
		w("write", "sub/.haygent"),
		w("write", "sub/dir/.haygent/store.db"),
	}
	slices.SortFunc(denied, func(a, b perm.Denial) int {
		switch {
		case a.Op.Target < b.Op.Target:
			return -1
		case a.Op.Target > b.Op.Target:
			return 1
		}
		return 0
	})
	if !slices.Equal(denied, wantDenied) {
		t.Errorf("denied %+v,\nwant %+v", denied, wantDenied)
	}
	want := maps.Clone(before)
	want["main.go"] = "package main // edited"
	want[".haygentish/new.txt"] = "allowed"
	if after := files(t, src); !maps.Equal(after, want) {
		t.Errorf("workspace after Apply:\n got %q\nwant %q", after, want)
	}
}

// The builtin steps' access to the workspace never reaches a store
// either.
func TestWorkspaceDeniesStorePaths(t *testing.T) {
	src := storeTree(t)
	set := mustSet(t, []string{"read:file:**", "write:file:**"}, nil)
	w, err := Open(src, set)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	before := files(t, src)
	if _, err := w.ReadFile(".haygent/keys/runner.key"); !isDenied(err, storeRule) {
		t.Errorf("ReadFile of the key: %v, want a denial", err)
	}
	if _, err := w.ReadFile("sub/dir/.haygent/store.db"); !isDenied(err, storeRule) {
		t.Errorf("ReadFile of a nested store: %v, want a denial", err)
	}
	if _, err := w.Stat(".haygent"); !isDenied(err, storeRule) {
		t.Errorf("Stat of the store: %v, want a denial", err)
	}
	if err := w.WriteFile(".haygent/keys/trusted", []byte("ed25519:planted\n"), 0o644); !isDenied(err, storeRule) {
		t.Errorf("WriteFile of the trust file: %v, want a denial", err)
	}
	if err := w.WriteFile("new/.haygent/keys/trusted", []byte("x"), 0o644); !isDenied(err, storeRule) {
		t.Errorf("WriteFile into a new store: %v, want a denial", err)
	}
	if err := w.Remove(".haygent/store.db"); !isDenied(err, storeRule) {
		t.Errorf("Remove of the database: %v, want a denial", err)
	}
	if _, err := w.List(".haygent"); !isDenied(err, storeRule) {
		t.Errorf("List of the store: %v, want a denial", err)
	}
	got, err := w.List(".")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, notStore) {
		t.Errorf("List . = %q, want %q", got, notStore)
	}
	if after := files(t, src); !maps.Equal(after, before) {
		t.Errorf("workspace changed:\n got %q\nwant %q", after, before)
	}
	if n := len(w.Denials()); n != 7 {
		t.Errorf("%d denials recorded, want 7: %+v", n, w.Denials())
	}
}

// A store of another name ('hg --store vault init') is fenced when it is
// named, however the workspace and the store are spelled: through a
// symbolic link to the workspace, or by a relative path.
func TestFenceNamedStore(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "project")
	tree(t, src, map[string]string{
		"vault/keys/runner.key": "hg ed25519 seed c2VlZA==",
		"vault/keys/trusted":    "ed25519:trusted\n",
		"vault/store.db":        "db",
		"vaulted/keep.txt":      "not the store",
		"main.go":               "package main",
	})
	symlink(t, src, filepath.Join(base, "link"))
	t.Chdir(base)
	set := mustSet(t, []string{"read:file:**", "write:file:**"}, nil)
	want := []string{"main.go", "vaulted/keep.txt"}
	for _, tc := range []struct{ name, ws, store string }{
		{"absolute", src, filepath.Join(src, "vault")},
		{"relative", "project", "project/vault"},
		{"workspace through a link", filepath.Join(base, "link"), filepath.Join(src, "vault")},
		{"store through a link", src, filepath.Join(base, "link", "vault")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := files(t, src)
			dst := filepath.Join(t.TempDir(), "s")
			m, err := Scratch(tc.ws, set, dst, tc.store)
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Sorted(maps.Keys(m.Files)); !slices.Equal(got, want) {
				t.Errorf("manifest %q, want %q", got, want)
			}
			tree(t, dst, map[string]string{"vault/keys/trusted": "ed25519:planted\n", "VAULT/x": "x", "vaulted/new.txt": "ok"})
			ch, err := Diff(m, dst)
			if err != nil {
				t.Fatal(err)
			}
			applied, denied, err := Apply(ch, dst, tc.ws, set, tc.store)
			if err != nil {
				t.Fatal(err)
			}
			if len(applied) != 1 || applied[0].Path != "vaulted/new.txt" {
				t.Errorf("applied %+v, want vaulted/new.txt alone", applied)
			}
			wantDenied := []perm.Denial{
				{Op: perm.Op{Verb: "write", Kind: "file", Target: "VAULT/x"}, Rule: storeRule},
				{Op: perm.Op{Verb: "write", Kind: "file", Target: "vault/keys/trusted"}, Rule: storeRule},
			}
			if !slices.Equal(denied, wantDenied) {
				t.Errorf("denied %+v, want %+v", denied, wantDenied)
			}
			after := files(t, src)
			delete(after, "vaulted/new.txt")
			if !maps.Equal(after, before) {
				t.Errorf("workspace changed:\n got %q\nwant %q", after, before)
			}
			os.Remove(filepath.Join(src, "vaulted/new.txt"))

			w, err := Open(tc.ws, set, tc.store)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if _, err := w.ReadFile("vault/keys/runner.key"); !isDenied(err, storeRule) {
				t.Errorf("ReadFile of the key: %v, want a denial", err)
			}
			if err := w.WriteFile("vault/keys/trusted", []byte("x"), 0o644); !isDenied(err, storeRule) {
				t.Errorf("WriteFile of the trust file: %v, want a denial", err)
			}
			if got, err := w.List("."); err != nil || !slices.Equal(got, want) {
				t.Errorf("List . = %q, %v; want %q", got, err, want)
			}
		})
	}
}

// A store reached under another name than the fence knows it by (a
// file system that ignores case, a bind mount) is still the store: it is
// known by identity.
func TestFenceKnowsStoreByIdentity(t *testing.T) {
	src := t.TempDir()
	tree(t, src, map[string]string{"vault/keys/runner.key": "key", "main.go": "package main"})
	f, err := NewFence(src, filepath.Join(src, "vault"))
	if err != nil {
		t.Fatal(err)
	}
	f.stores = nil // as if the store's path did not match its name here
	root, err := os.OpenRoot(src)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, p := range []string{"vault", "vault/keys", "vault/keys/runner.key", "vault/new/file"} {
		if !f.blocks(root, p) {
			t.Errorf("%s is not fenced", p)
		}
	}
	if f.blocks(root, "main.go") || f.blocks(root, "other/file") {
		t.Error("a path outside the store is fenced")
	}
}

// A store outside the workspace fences nothing; a workspace that is a
// store, or lies inside one, is fenced whole.
func TestFenceWhereTheStoreIs(t *testing.T) {
	base := t.TempDir()
	tree(t, base, map[string]string{"st/keys/runner.key": "key", "st/ws/a.txt": "a", "other/b.txt": "b"})
	set := mustSet(t, []string{"read:file:**"}, nil)
	for _, tc := range []struct {
		name, ws string
		want     []string
	}{
		{"store outside", filepath.Join(base, "other"), []string{"b.txt"}},
		{"workspace is the store", filepath.Join(base, "st"), nil},
		{"workspace inside the store", filepath.Join(base, "st", "ws"), nil},
		{"store missing", filepath.Join(base, "other"), []string{"b.txt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := filepath.Join(base, "st")
			if tc.name == "store missing" {
				store = filepath.Join(base, "nowhere")
			}
			m, err := Scratch(tc.ws, set, filepath.Join(t.TempDir(), "s"), store)
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Sorted(maps.Keys(m.Files)); !slices.Equal(got, tc.want) {
				t.Errorf("copied %q, want %q", got, tc.want)
			}
		})
	}
}

// A store that does not exist yet is fenced by its path: a step may not
// make it.
func TestFenceStoreNotThereYet(t *testing.T) {
	src := t.TempDir()
	tree(t, src, map[string]string{"main.go": "package main"})
	set := mustSet(t, []string{"read:file:**", "write:file:**"}, nil)
	store := filepath.Join(src, "later", "hg")
	f, err := NewFence(src, store)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Stores(); !slices.Equal(got, []string{"later/hg"}) {
		t.Errorf("Stores() = %q, want [later/hg]", got)
	}
	scratch, ch := step(t, src, set, func(s func(string) string) {
		os.MkdirAll(s("later/hg/keys"), 0o755)
		os.WriteFile(s("later/hg/keys/trusted"), []byte("ed25519:planted\n"), 0o644)
		os.WriteFile(s("later/note.txt"), []byte("allowed"), 0o644)
	})
	applied, denied, err := Apply(ch, scratch, src, set, store)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != 1 || applied[0].Path != "later/note.txt" {
		t.Errorf("applied %+v, want later/note.txt alone", applied)
	}
	want := []perm.Denial{{Op: perm.Op{Verb: "write", Kind: "file", Target: "later/hg/keys/trusted"}, Rule: storeRule}}
	if !slices.Equal(denied, want) {
		t.Errorf("denied %+v, want %+v", denied, want)
	}
	if _, err := os.Lstat(store); err == nil {
		t.Error("the store's directory was made")
	}
}

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/cas/boltstore"
	"github.com/ipfs/go-cid"
)

// TestMCPRunnerKeysUnreadable: no tool hands a client a runner key, by
// whatever way it lies under the root: a hard link to the store's key
// under another name, another store not named .haygent (known by its
// contents), a Work Order workspace holding such a link, a package
// holding a store or such a link.
func TestMCPRunnerKeysUnreadable(t *testing.T) {
	f := newMCPFixture(t)
	hg := hgBinary(t)
	if out, err := exec.Command(hg, "--store", f.store, "key", "gen").CombinedOutput(); err != nil {
		t.Fatalf("key gen: %v: %s", err, out)
	}
	key, err := os.ReadFile(keyPath(f.store))
	if err != nil {
		t.Fatal(err)
	}
	link := func(rel string) {
		t.Helper()
		p := filepath.Join(f.root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(keyPath(f.store), p); err != nil {
			t.Fatal(err)
		}
	}
	link("notes.txt")
	other := filepath.Join(f.root, "other", "st")
	if err := boltstore.Init(other); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(hg, "--store", other, "key", "gen").CombinedOutput(); err != nil {
		t.Fatalf("key gen: %v: %s", err, out)
	}
	otherKey, err := os.ReadFile(keyPath(other))
	if err != nil {
		t.Fatal(err)
	}
	// A workspace with the key linked in it, beside a file of its own.
	f.write(t, "ws/own.txt", "mine\n")
	link("ws/data.txt")
	if out, err := exec.Command("cp", "-a", "../../fixtures/haygents/reader", filepath.Join(f.root, "haygents", "reader")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	f.write(t, "workorders/ws-key.json", `{"workorder": "wskey", "objective": "read the key through a workspace",
		"nodes": {"n": {"haygent": "../haygents/reader", "workspace": "../ws", "input": {"path": "own.txt"}}}}`)
	// Packages: one holding a store named as stores are, one holding a
	// store by another name, one holding the key linked.
	for _, p := range []string{"pkgdot", "pkgst", "pkglink"} {
		if out, err := exec.Command("cp", "-a", "../../fixtures/haygents/echo", filepath.Join(f.root, "haygents", p)).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v: %s", err, out)
		}
		f.write(t, "workorders/"+p+".json", `{"workorder": "`+p+`", "objective": "read a key through a package",
			"nodes": {"n": {"haygent": "../haygents/`+p+`", "input": {"value": 1, "trail": []}}}}`)
	}
	for _, d := range []string{"haygents/pkgdot/.haygent", "haygents/pkgst/st"} {
		if err := boltstore.Init(filepath.Join(f.root, d)); err != nil {
			t.Fatal(err)
		}
		f.write(t, d+"/keys/runner.key", "a nested store's key")
	}
	link("haygents/pkglink/contracts/notes.txt")

	cs := f.connect(t, mcpOptions{})
	for _, p := range []string{"notes.txt", "other/st/keys/runner.key", "other/st", "other/st/keys", "haygents/pkgdot/.haygent/keys/runner.key"} {
		if msg := refused(t, cs, "put", map[string]any{"path": p}); !strings.Contains(msg, "store") {
			t.Errorf("put %s: %s", p, msg)
		}
	}
	for _, p := range []string{"pkgdot", "pkgst", "pkglink"} {
		for _, tool := range []string{"plan", "submit"} {
			if msg := refused(t, cs, tool, map[string]any{"workorder": "workorders/" + p + ".json"}); !strings.Contains(msg, "store") && !strings.Contains(msg, "runner key") {
				t.Errorf("%s of a package %s: %s", tool, p, msg)
			}
		}
	}
	// A tree put holds neither the link nor the other store.
	var put putOut
	call(t, cs, "put", map[string]any{"path": "."}, &put)
	var got getOut
	call(t, cs, "get", map[string]any{"ref": put.CID}, &got)
	for _, e := range got.Entries {
		if e.Name == "notes.txt" {
			t.Errorf("put . stored the key linked as notes.txt: %+v", e)
		}
	}
	got = getOut{}
	call(t, cs, "get", map[string]any{"ref": put.CID, "path": "other"}, &got)
	if len(got.Entries) != 0 {
		t.Errorf("put . stored other/st: %+v", got.Entries)
	}
	// The workspace runs without the link.
	var sub submitOut
	call(t, cs, "submit", map[string]any{"workorder": "workorders/ws-key.json"}, &sub)
	if st := waitRun(t, cs, sub.Run); st.Status != "done" {
		t.Fatalf("run %s: %+v", sub.Run, st)
	}
	got = getOut{}
	call(t, cs, "get", map[string]any{"ref": sub.Run + "/n", "path": "own.txt"}, &got)
	if got.Text == nil || *got.Text != "mine\n" {
		t.Fatalf("the workspace's own file: %+v", got)
	}
	if msg := refused(t, cs, "get", map[string]any{"ref": sub.Run + "/n", "path": "data.txt"}); !strings.Contains(msg, "no entry") {
		t.Errorf("get of the linked key through the workspace: %s", msg)
	}
	// Nothing stored holds either key.
	for _, k := range [][]byte{key, otherKey} {
		if storeHolds(t, f.store, k) {
			t.Fatalf("the store holds a runner key's content")
		}
	}
}

// storeHolds reports whether any block of the store at dir holds data.
func storeHolds(t *testing.T, dir string, data []byte) bool {
	t.Helper()
	ctx := context.Background()
	st, err := boltstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	found := false
	err = st.AllKeys(ctx, func(c cid.Cid, _ int) error {
		return st.View(ctx, c, func(b []byte) error {
			found = found || bytes.Contains(b, data)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

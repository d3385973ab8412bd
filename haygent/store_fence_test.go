package haygent_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
)

// storeKey is the signing key of the store a fenced workspace holds.
var storeKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x42}, ed25519.SeedSize))

// fencedRun runs the package in pkgDir on a workspace holding a store at
// store (workspace-relative) with its runner key and trust file, and
// returns the result, the workspace and the trust file's content before
// the run. With named, the run's Options.StoreDir names the store.
func fencedRun(t *testing.T, st cas.Store, pkgDir, store string, named bool) (*haygent.Result, string, []byte) {
	t.Helper()
	ws := t.TempDir()
	trusted := []byte("ed25519:LHPwBdbqTjFqCbD8fhW6A37n1X8cpx9sTz-ZC3ab5oY\n")
	keyText := "hg ed25519 seed " + base64.StdEncoding.EncodeToString(storeKey.Seed()) + "\n"
	for p, content := range map[string]string{
		store + "/keys/runner.key": keyText,
		store + "/keys/trusted":    string(trusted),
		store + "/store.db":        "the database",
		"main.go":                  "package main\n",
	} {
		full := filepath.Join(ws, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pkg, err := haygent.Load(pkgDir)
	if err != nil {
		t.Fatal(err)
	}
	opts := haygent.Options{Store: st, Key: verifyKey, Workspace: ws, Now: fixedClock}
	if named {
		opts.StoreDir = filepath.Join(ws, filepath.FromSlash(store))
	}
	res, err := haygent.Run(context.Background(), pkg, map[string]any{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res, ws, trusted
}

// A step granted every file, in a workspace that holds the store: it
// finds no key to copy, its change to the trust file is denied with the
// store's rule and recorded, the trust file is unchanged, and with
// on_denied halt (the default) the run halts. The receipt's workspace
// snapshot holds no store, and no block holds the key.
func TestStepCannotReachStore(t *testing.T) {
	for _, tc := range []struct {
		name, onDenied string
		want           string // status
	}{
		{name: "on_denied halt", onDenied: "", want: ledger.StatusHalt},
		{name: "on_denied continue", onDenied: "continue", want: ledger.StatusPass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{}
			if tc.onDenied != "" {
				files["spine/spine.json"] = `{"steps": [{"id": "probe", "kind": "exec", "command": "probe", "outputs": ["out.txt", "stolen.txt"], "on_denied": "` + tc.onDenied + `"}]}`
			}
			dir := copyPackage(t, "storeprobe", files)
			st := memstore.New()
			res, ws, trusted := fencedRun(t, st, dir, ".haygent", false)
			checkFenced(t, st, res, ws, ".haygent", trusted, tc.want)
		})
	}
}

// A store of another name inside the workspace ('hg --store vault init'),
// named by Options.StoreDir, is fenced the same way.
func TestStepCannotReachNamedStore(t *testing.T) {
	for _, store := range []string{"vault", "data/hg"} {
		t.Run(store, func(t *testing.T) {
			perms, err := os.ReadFile(filepath.Join(fixtures, "haygents", "storeprobe", "permissions.json"))
			if err != nil {
				t.Fatal(err)
			}
			dir := copyPackage(t, "storeprobe", map[string]string{
				"permissions.json": string(bytes.ReplaceAll(perms, []byte(".haygent/keys"), []byte(store+"/keys"))),
			})
			st := memstore.New()
			res, ws, trusted := fencedRun(t, st, dir, store, true)
			checkFenced(t, st, res, ws, store, trusted, ledger.StatusHalt)
		})
	}
}

// checkFenced checks what TestStepCannotReachStore promises, for the
// store at store (workspace-relative).
func checkFenced(t *testing.T, st cas.Store, res *haygent.Result, ws, store string, trusted []byte, status string) {
	t.Helper()
	r := res.Receipt
	if r.Status != status {
		t.Errorf("status %s (%+v), want %s", r.Status, r.Halt, status)
	}
	if status == ledger.StatusHalt && (r.Halt == nil || r.Halt.Verdict != "DENIED") {
		t.Errorf("halt %+v, want DENIED", r.Halt)
	}
	want := ledger.Denied{Verb: "write", Kind: "file", Target: store + "/keys/trusted", Rule: "inside an hg store"}
	if !slices.Contains(r.Denied, want) {
		t.Errorf("denied %+v, want it to hold %+v", r.Denied, want)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, filepath.FromSlash(store), "keys", "trusted")); !bytes.Equal(got, trusted) {
		t.Errorf("the trust file is now %q, want %q", got, trusted)
	}
	if got, err := os.ReadFile(filepath.Join(ws, "stolen.txt")); err != nil || len(got) != 0 {
		t.Errorf("stolen.txt: %q, %v; want it empty", got, err)
	}
	if r.Workspace == nil {
		t.Fatal("no workspace snapshot")
	}
	snap := filepath.Join(t.TempDir(), "snap")
	if err := cas.GetTree(context.Background(), st, r.Workspace.Cid, snap, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(snap, "main.go")); err != nil {
		t.Errorf("the snapshot lacks main.go: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(snap, filepath.FromSlash(store))); err == nil {
		t.Errorf("the snapshot holds the store %s", store)
	}
	seed := storeKey.Seed()
	grepStore(t, st, []string{string(seed), base64.StdEncoding.EncodeToString(seed), base64.RawURLEncoding.EncodeToString(seed)})
	wantOK(t, verifyOf(t, st, res.ReceiptCID, trusted0))
}

// trusted0 is the key the fenced runs are signed with.
var trusted0 = []ed25519.PublicKey{verifyPub}

// Builtin steps reach the workspace through workspace.Open, which keeps
// every directory named .haygent out of reach: a read of the key and a
// write to the trust file are denied and recorded, and the run halts.
func TestBuiltinStepCannotReachStore(t *testing.T) {
	for _, tc := range []struct{ name, path, step string }{
		{"write_file", ".haygent/keys/trusted", `{"id": "plant", "kind": "builtin", "op": "write_file", "args": {"path": ".haygent/keys/trusted", "template": "ed25519:DXVQdU4IAKXSN-71gmA1dmubPloVhoqUCrKJlYeI47A\n"}}`},
		{"read_file", ".haygent/keys/runner.key", `{"id": "take", "kind": "builtin", "op": "read_file", "args": {"path": ".haygent/keys/runner.key", "to": "/output/key"}}`},
		{"roundtrip", ".haygent/keys/runner.key", `{"id": "take", "kind": "builtin", "op": "roundtrip", "args": {"path": ".haygent/keys/runner.key"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyPackage(t, "storeprobe", map[string]string{"spine/spine.json": `{"steps": [` + tc.step + `]}`})
			st := memstore.New()
			res, ws, trusted := fencedRun(t, st, dir, ".haygent", false)
			r := res.Receipt
			if r.Status != ledger.StatusHalt || r.Halt == nil || r.Halt.Verdict != "DENIED" {
				t.Errorf("status %s, halt %+v; want HALT (DENIED)", r.Status, r.Halt)
			}
			if len(r.Denied) == 0 {
				t.Error("no denial recorded")
			}
			for _, d := range r.Denied {
				if d.Rule != "inside an hg store" || d.Target != tc.path {
					t.Errorf("denied %+v, want %s inside an hg store", d, tc.path)
				}
			}
			if got, _ := os.ReadFile(filepath.Join(ws, ".haygent", "keys", "trusted")); !bytes.Equal(got, trusted) {
				t.Errorf("the trust file is now %q, want %q", got, trusted)
			}
			seed := storeKey.Seed()
			grepStore(t, st, []string{string(seed), base64.StdEncoding.EncodeToString(seed), base64.RawURLEncoding.EncodeToString(seed)})
		})
	}
}

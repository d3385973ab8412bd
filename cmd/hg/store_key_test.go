package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/haygent/ledger"
)

// keyNeedles returns the forms a signing key could take in a file: the
// seed and the whole private key as raw bytes, in hex (both cases), in
// base64 (standard and URL alphabets, padded or not, and at each of the
// three alignments a longer base64 text could give them), and the line of
// the key file itself.
func keyNeedles(t *testing.T, keyFile string) map[string][]byte {
	t.Helper()
	text, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ledger.LoadKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{"key file": bytes.TrimSpace(text)}
	for name, raw := range map[string][]byte{"seed": key.Seed(), "private key": []byte(key)} {
		addEncodedForms(out, name, raw)
	}
	return out
}

// addEncodedForms adds to out, under names starting with name, raw as
// bytes, in hex (both cases) and in base64 (standard and URL alphabets,
// padded or not, and at each of the three alignments a longer base64
// text could give it).
func addEncodedForms(out map[string][]byte, name string, raw []byte) {
	out[name+" raw"] = raw
	out[name+" hex"] = []byte(hex.EncodeToString(raw))
	out[name+" HEX"] = []byte(strings.ToUpper(hex.EncodeToString(raw)))
	for enc, e := range map[string]*base64.Encoding{
		"base64": base64.StdEncoding, "base64url": base64.URLEncoding,
		"raw base64": base64.RawStdEncoding, "raw base64url": base64.RawURLEncoding,
	} {
		out[name+" "+enc] = []byte(e.EncodeToString(raw))
		// Inside a longer text: the characters made of raw's bits
		// alone, after 0, 1 or 2 bytes of something else.
		for k := range 3 {
			s := e.EncodeToString(append(make([]byte, k), raw...))
			first := (8*k + 5) / 6
			last := (8*(k+len(raw)))/6 - 1
			out[name+" "+enc+" at +"+string(rune('0'+k))] = []byte(s[first : last+1])
		}
	}
}

// grepKey fails the test for each file under root (but those under
// skip) that holds one of needles.
func grepKey(t *testing.T, root, skip string, needles map[string][]byte) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == skip {
				return filepath.SkipDir
			}
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		for what, needle := range needles {
			if bytes.Contains(data, needle) {
				t.Errorf("%s holds the runner key (%s)", p, what)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A store inside the workspace it works on: the Haygent is granted every
// file and goes looking for the runner key; the receipt's workspace
// snapshot is taken; the run is exported as a bundle. No form of the key
// is in the store's database, its packs or the bundle, nor in anything
// the step wrote, and the step changed nothing in the store.
func TestRunnerKeyNeverInStoreOrBundle(t *testing.T) {
	fixture, err := filepath.Abs("../../fixtures/haygents/storeprobe")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		store string // --store, relative to the workspace; "" for hg init's .haygent
	}{
		{name: "hg init", store: ""},
		{name: "--store inside", store: "vault"},
		{name: "--store nested", store: "data/hg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			out := t.TempDir()
			t.Chdir(ws)
			if err := os.WriteFile("main.go", []byte("package main\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var global []string
			storeDir, rel := filepath.Join(ws, ".haygent"), ".haygent"
			if tc.store != "" {
				rel = tc.store
				global = []string{"--store", tc.store}
				storeDir = filepath.Join(ws, filepath.FromSlash(tc.store))
				if err := os.MkdirAll(filepath.Dir(storeDir), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			hg := func(want int, args ...string) string {
				t.Helper()
				var stdout, stderr bytes.Buffer
				args = append(append([]string{}, global...), args...)
				if got := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr); got != want {
					t.Fatalf("hg %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), got, want, stdout.String(), stderr.String())
				}
				return stdout.String()
			}
			// The probe, aimed at this store's trust file.
			probe := filepath.Join(out, "storeprobe")
			if err := os.CopyFS(probe, os.DirFS(fixture)); err != nil {
				t.Fatal(err)
			}
			perms := filepath.Join(probe, "permissions.json")
			data, err := os.ReadFile(perms)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(perms, bytes.ReplaceAll(data, []byte(".haygent/keys"), []byte(rel+"/keys")), 0o644); err != nil {
				t.Fatal(err)
			}

			hg(0, "init")
			hg(0, "key", "gen")
			hg(0, "key", "trust", "ed25519:LHPwBdbqTjFqCbD8fhW6A37n1X8cpx9sTz-ZC3ab5oY")
			trusted, err := os.ReadFile(filepath.Join(storeDir, "keys", "trusted"))
			if err != nil {
				t.Fatal(err)
			}
			// exit 3: the step's change to the trust file halts the run.
			var stdout, stderr bytes.Buffer
			runArgs := append(append([]string{}, global...), "haygent", "run", probe, "--workspace", ".", "--pin", "probe")
			if got := run(context.Background(), runArgs, strings.NewReader(""), &stdout, &stderr); got != 3 {
				t.Errorf("hg haygent run: exit %d, want 3 (HALT)\nstderr: %s", got, stderr.String())
			}
			bundles := filepath.Join(out, "bundles")
			if err := os.Mkdir(bundles, 0o755); err != nil {
				t.Fatal(err)
			}
			hg(0, "bundle", "export", "probe", "-o", filepath.Join(bundles, "probe.car"))

			needles := keyNeedles(t, filepath.Join(storeDir, "keys", "runner.key"))
			// store.db, and the packs if any (a small run's blocks stay
			// in the database); everything but the keys themselves.
			if n := grepKey(t, storeDir, filepath.Join(storeDir, "keys"), needles); n < 1 {
				t.Fatalf("no store file read")
			}
			if n := grepKey(t, bundles, "", needles); n != 1 {
				t.Fatalf("%d bundles read, want 1", n)
			}
			for _, f := range []string{"stolen.txt", "out.txt"} {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatalf("the step's %s was not applied: %v", f, err)
				}
				for what, needle := range needles {
					if bytes.Contains(data, needle) {
						t.Errorf("the step wrote the runner key (%s) into %s", what, f)
					}
				}
			}
			if after, _ := os.ReadFile(filepath.Join(storeDir, "keys", "trusted")); !bytes.Equal(after, trusted) {
				t.Errorf("the trust file changed:\n%s\nwant\n%s", after, trusted)
			}
			report := hg(0, "report", "probe")
			if want := "DENIED  write:file:" + rel + "/keys/trusted  (inside an hg store)"; !strings.Contains(report, want) {
				t.Errorf("the report shows no %q:\n%s", want, report)
			}

			// The workspace snapshot, taken before the step, holds the
			// project and not its store.
			var receipt struct {
				Workspace struct {
					CID string `json:"/"`
				} `json:"workspace"`
			}
			if err := json.Unmarshal([]byte(hg(0, "dag", "get", "probe")), &receipt); err != nil {
				t.Fatal(err)
			}
			snap := filepath.Join(out, "snapshot")
			hg(0, "get", receipt.Workspace.CID, "-o", snap)
			if _, err := os.Stat(filepath.Join(snap, "main.go")); err != nil {
				t.Errorf("the snapshot lacks main.go: %v", err)
			}
			if _, err := os.Lstat(filepath.Join(snap, filepath.FromSlash(rel))); err == nil {
				t.Errorf("the snapshot holds the store %s", rel)
			}

			// Replayed from a copy of the workspace as it was, store and
			// all: the copy leaves the store out, and the replay agrees.
			for _, f := range []string{"out.txt", "stolen.txt"} {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
			}
			hg(0, "replay", "probe", "--workspace", ".")
		})
	}
}

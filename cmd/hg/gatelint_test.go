package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// haygentDirs lists every Haygent package under roots: each directory
// holding a haygent.manifest.json.
func haygentDirs(t *testing.T, roots ...string) []string {
	t.Helper()
	var dirs []string
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && d.Name() == "haygent.manifest.json" {
				dirs = append(dirs, filepath.Dir(path))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return dirs
}

// TestCheckEveryHaygentPackage: hg haygent check passes every Haygent
// package in the repository (fixtures/haygents/** and the benchmark
// packages), so the gate lint, probes included, refuses none of their
// real gates.
func TestCheckEveryHaygentPackage(t *testing.T) {
	dirs := haygentDirs(t, "../../fixtures/haygents", "../../haygent/testdata")
	if len(dirs) < 16 {
		t.Fatalf("found %d packages: %q", len(dirs), dirs)
	}
	for _, dir := range dirs {
		var out bytes.Buffer
		if code := runHGOut(t, &out, nil, "haygent", "check", "--json", dir); code != 0 || !strings.Contains(out.String(), `"ok":true`) {
			t.Errorf("hg haygent check %s: exit %d, %s", dir, code, out.String())
		}
	}
}

// TestCheckRefusesGateNoProbeFails: a fixture package whose gate is made
// unable to fail, in ways only the probes see, is refused (exit 1) with
// the probes named; its real gate passes.
func TestCheckRefusesGateNoProbeFails(t *testing.T) {
	const real = "ev.total > 0 && ev.failed == 0 && size(ev.problems) == 0"
	for _, pred := range []string{
		"ev.ok || !ev.ok",
		"ev.failed >= 0 || ev.failed < 0",
		"size(ev.problems) >= 0",
		"ev.failed == 0 || ev.failed != 0",
		"size(ev.failed_cases) >= 0 && (ev.total > 0 || ev.total <= 0)",
	} {
		t.Run(pred, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS("../../fixtures/haygents/gotest")); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(dir, "gates", "gates.json")
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(data, []byte(real)) {
				t.Fatalf("gates.json does not hold %s", real)
			}
			if err := os.WriteFile(file, bytes.Replace(data, []byte(real), []byte(pred), 1), 0o644); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if code := runHGOut(t, &out, nil, "haygent", "check", dir); code != 1 {
				t.Fatalf("exit %d, want 1; %s", code, out.String())
			}
			if !strings.Contains(out.String(), "gates.json: gate TEST_PASS: predicate: no probe makes it false, so the gate cannot fail: tried ") ||
				!strings.Contains(out.String(), " among them {") {
				t.Fatalf("output does not name the refusal and its probes: %s", out.String())
			}
		})
	}
}

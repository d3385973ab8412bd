package haygent_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/haygent"
)

// TestCheckRefusesUnprintableIdentifiers: every identifier of a package
// (step ids, slot names, the name and version, gate subjects, the fields
// a slot may set, projections) holding a control character, a bidi
// override or anything else a terminal would not show as written is a
// problem of the lint, as it is for gate ids: such a name would reach
// every transition, receipt and report. Each case renames consistently,
// so that nothing but the character is wrong.
func TestCheckRefusesUnprintableIdentifiers(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		old  string // every occurrence in file is replaced by new
		new  string
		want string
	}{
		{"step id with ESC", haygent.SpineFile, `"id": "test"`, `"id": "test\u001b[2K"`, `step 1 ("test\x1b[2K"): id "test\x1b[2K" holds '\x1b'`},
		{"step id with a line break", haygent.SpineFile, `"id": "test"`, `"id": "test\nPASS"`, `id "test\nPASS" holds '\n'`},
		{"step id with a bidi override", haygent.SpineFile, `"id": "test"`, `"id": "test\u202e"`, `holds '\u202e'`},
		{"step id rerun from", haygent.SpineFile + "+" + haygent.ManifestFile, `"render"`, `"ren\u001bder"`, `id "ren\x1bder" holds '\x1b'`},
		{"slot name with ESC", haygent.ManifestFile, `"fix"`, `"fix\u001b[31m"`, `slot "fix\x1b[31m": name holds '\x1b'`},
		{"package name", haygent.ManifestFile, `"name": "gotest"`, `"name": "go\u0007test"`, `name "go\atest" holds '\a'`},
		{"version", haygent.ManifestFile, `"version": "1.0.0"`, `"version": "1.0.0\u2066"`, `version "1.0.0\u2066" holds '\u2066'`},
		{"repair gate", haygent.ManifestFile, `"gates": ["TEST_PASS"]`, `"gates": ["TEST_PASS\u0085"]`, `repair: gate "TEST_PASS\u0085" holds '\u0085'`},
		{"slot model", haygent.ManifestFile, `"fallback": "halt"`, `"fallback": "halt", "model": "m\u001b]0;x\u0007"`, `model "m\x1b]0;x\a" holds '\x1b'`},
		{"projection", haygent.ManifestFile, `"/failures"`, `"/failures\r"`, `projection "/failures\r" holds '\r'`},
		{"report file", haygent.SpineFile, `"report": "go-test-json"`, `"report": "go-test-json:out\u001b.json"`, `report "go-test-json:out\x1b.json" holds '\x1b'`},
		{"gate subject", haygent.GatesFile, `"subject": "step:test"`, `"subject": "step:test\u200f"`, `gate "TEST_PASS": subject "step:test\u200f" holds '\u200f'`},
		{"adjustable field", haygent.AdjustSchema, `"factor": {`, `"fac\u001btor": {`, `field "fac\x1btor" holds '\x1b'`},
		{"command name", haygent.SpineFile + "+" + haygent.PermissionsFile, `go-test`, `go\u001btest`, `"go\x1btest"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(filepath.Join(fixtures, "haygents", "gotest"))); err != nil {
				t.Fatal(err)
			}
			for _, file := range strings.Split(tc.file, "+") {
				path := filepath.Join(dir, file)
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(data), tc.old) {
					t.Fatalf("%s does not contain %s", file, tc.old)
				}
				if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(data), tc.old, tc.new)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := haygent.Load(dir)
			var pe *haygent.ProblemsError
			if !errors.As(err, &pe) {
				t.Fatalf("Load = %v, want problems", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("problems %q do not mention %q", err, tc.want)
			}
		})
	}
}

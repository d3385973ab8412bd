package haygent_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/haygent"
)

// TestLoadFixtures: every fixture package passes the lint.
func TestLoadFixtures(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join(fixtures, "haygents", "*"))
	if len(dirs) < 5 {
		t.Fatalf("found %d fixture packages", len(dirs))
	}
	for _, dir := range dirs {
		if _, err := haygent.Load(dir); err != nil {
			t.Errorf("%s: %v", dir, err)
		}
	}
}

// TestCheckRejects breaks the gotest fixture one way at a time and checks
// that the lint names each problem.
func TestCheckRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		old  string // replaced by new in file; "" means write new as the whole file
		new  string
		want string
	}{
		{"constant gate", haygent.GatesFile, `"ev.total > 0 && ev.failed == 0 && size(ev.problems) == 0"`, `"true"`, "constant"},
		{"gate reads no evidence", haygent.GatesFile, `"ev.total > 0 && ev.failed == 0 && size(ev.problems) == 0"`, `"1 == 1"`, "constant"},
		{"no rule for missing evidence", haygent.GatesFile, `"on_missing": "fail",`, ``, "on_missing"},
		{"no gates", haygent.GatesFile, "", `{"gates": []}`, "no gates"},
		{"command without a grant", haygent.SpineFile, `"command": "go-test"`, `"command": "rm-rf"`, `command "rm-rf" has no run:command grant`},
		{"unknown step kind", haygent.SpineFile, `"kind": "exec"`, `"kind": "shell"`, `unknown step kind "shell"`},
		{"unknown builtin", haygent.SpineFile, `"op": "write_file"`, `"op": "eval"`, `unknown builtin op "eval"`},
		{"slot without a verifier", haygent.ManifestFile, `"verifier": {"forbid": ["read:file:", "write:file:", "run:command:"]},`, ``, "no verifier"},
		{"slot without a limit", haygent.ManifestFile, `"limit": 2,`, `"limit": 0,`, "limit 0"},
		{"schema does not compile", haygent.InputSchema, `"type": "object"`, `"type": 12`, "input.schema.json"},
		{"open adjustable schema", haygent.AdjustSchema, `"additionalProperties": false`, `"additionalProperties": true`, "additionalProperties"},
		{"adjustable field named like a grant", haygent.AdjustSchema, `"factor": {`, `"permissions": {"type": "string"}, "factor": {`, `"permissions"`},
		{"bad permissions", haygent.PermissionsFile, `"network:none",`, `"network:none", "network:example.com",`, "permissions.json"},
		{"manifest with a key twice", haygent.ManifestFile, `"limit": 2,`, `"limit": 2, "limit": 3,`, `duplicate key "limit"`},
		{"spine with a key twice", haygent.SpineFile, `"kind": "exec"`, `"kind": "exec", "kind": "builtin"`, `duplicate key "kind"`},
		{"repair from an unknown step", haygent.ManifestFile, `"rerun_from": "render"`, `"rerun_from": "nowhere"`, `rerun_from "nowhere"`},
		{"schema that refers to itself", haygent.InputSchema, `"note": {"type": "string", "maxLength": 2000}`,
			`"note": {"$ref": "#/$defs/loop"}}, "$defs": {"loop": {"$ref": "#/$defs/loop"}`,
			"contracts/input.schema.json: reference cycle at #/$defs/loop:"},
		{"schema root that refers to itself", haygent.OutputSchema, `"type": "object"`, `"$ref": "#"`,
			"contracts/output.schema.json: reference cycle at #:"},
		{"ring of refs no one uses", haygent.InputSchema, `"additionalProperties": false`,
			`"additionalProperties": false, "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"type": "string"}, {"$ref": "#/$defs/a"}]}}`,
			"reference cycle at #/$defs/a: #/$defs/a -> #/$defs/b -> #/$defs/b/allOf/1 -> #/$defs/a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(filepath.Join(fixtures, "haygents", "gotest"))); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, tc.file)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			text := tc.new
			if tc.old != "" {
				if !strings.Contains(string(data), tc.old) {
					t.Fatalf("%s does not contain %s", tc.file, tc.old)
				}
				text = strings.Replace(string(data), tc.old, tc.new, 1)
			}
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = haygent.Load(dir)
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

// TestCheckAcceptsRecursiveSchema: a schema that refers to itself for a
// part of the value (a tree of nodes) is ordinary recursion, not a cycle.
func TestCheckAcceptsRecursiveSchema(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(fixtures, "haygents", "gotest"))); err != nil {
		t.Fatal(err)
	}
	schema := `{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
 "properties": {"note": {"type": "string"}, "tree": {"$ref": "#/$defs/node"}},
 "$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                    "anyOf": [{"$ref": "#/$defs/leaf"}, {"required": ["kids"]}]},
           "leaf": {"properties": {"value": {"$ref": "#"}}}}}`
	if err := os.WriteFile(filepath.Join(dir, haygent.InputSchema), []byte(schema), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := haygent.Load(dir); err != nil {
		t.Fatal(err)
	}
}

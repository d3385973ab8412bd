package haygent_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/haygent"
)

// A report file that a builtin write_file puts in place (its content from
// the input or a slot's answer) is refused by the lint.
func TestCheckRefusesWritableReportPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pkg")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(fixtures, "haygents", "reportorigin"))); err != nil {
		t.Fatal(err)
	}
	spine := `{"steps": [
  {"id": "claim", "kind": "builtin", "op": "write_file", "args": {"path": "./report.xml", "template": "{{.input}}"}},
  {"id": "check", "kind": "exec", "command": "check", "report": "junit:report.xml"}
]}`
	if err := os.WriteFile(filepath.Join(dir, "spine", "spine.json"), []byte(spine), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := haygent.Load(dir)
	var pe *haygent.ProblemsError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), `report file "report.xml" is written by step 0 ("claim", write_file)`) {
		t.Fatalf("Load = %v, want the report path flagged", err)
	}
}

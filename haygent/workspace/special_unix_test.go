//go:build unix

package workspace

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Named pipes are never copied, are reported by Diff and never applied,
// and a pipe in place of a file does not block a read.
func TestSpecialFiles(t *testing.T) {
	src := t.TempDir()
	tree(t, src, map[string]string{"gen/a": "a"})
	if err := syscall.Mkfifo(filepath.Join(src, "gen/pipe"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	set := mustSet(t, []string{"read:file:gen/**", "write:file:gen/**"}, nil)

	w, err := Open(src, set)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.ReadFile("gen/pipe"); err == nil {
		t.Error("ReadFile of a pipe succeeded")
	}
	if got, _ := w.List("."); len(got) != 1 || got[0] != "gen/a" {
		t.Errorf("List = %q", got)
	}

	scratch := filepath.Join(t.TempDir(), "s")
	m, err := Scratch(src, set, scratch)
	if err != nil {
		t.Fatal(err)
	}
	if m.Skipped["gen/pipe"] != "named pipe" || len(m.Files) != 1 {
		t.Fatalf("manifest %+v", m)
	}
	if err := syscall.Mkfifo(filepath.Join(scratch, "gen/newpipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	ch, err := Diff(m, scratch)
	if err != nil || len(ch) != 1 || ch[0].Kind != Special || ch[0].Path != "gen/newpipe" {
		t.Fatalf("Diff = %+v, %v", ch, err)
	}
	applied, denied, err := Apply(ch, scratch, src, set)
	if err != nil || len(applied) != 0 || len(denied) != 1 || denied[0].Rule != RuleSpecial {
		t.Fatalf("Apply = %v, %v, %v", applied, denied, err)
	}
	if _, err := os.Lstat(filepath.Join(src, "gen/newpipe")); err == nil {
		t.Error("pipe applied")
	}
}

package haygent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A report planted before the command counts only if the command wrote
// other bytes into it: touching it, or changing its mode, is not writing
// it. A FIFO is not read at all.
func TestReportOrigin(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "report.xml")
	os.WriteFile(p, []byte("<testsuite tests=\"3\"/>"), 0o644)
	before := markFile(dir, "report.xml")
	time.Sleep(20 * time.Millisecond)
	os.Chmod(p, 0o600)
	os.Chtimes(p, time.Now(), time.Now())
	if why := reportNotWritten("check", "report.xml", before, markFile(dir, "report.xml")); !strings.Contains(why, "did not write it") {
		t.Errorf("touched: %q, want it refused", why)
	}
	os.WriteFile(p, []byte("<testsuite tests=\"1\"/>"), 0o644)
	if why := reportNotWritten("check", "report.xml", before, markFile(dir, "report.xml")); why != "" {
		t.Errorf("rewritten: %q, want it taken", why)
	}
	if why := reportNotWritten("check", "report.xml", fileMark{}, markFile(dir, "report.xml")); why != "" {
		t.Errorf("created: %q, want it taken", why)
	}
}

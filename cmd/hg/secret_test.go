package main

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A granted secret carried by a step's test report (test names, failure
// messages), stdout, stderr, written files, a file's name and its exit
// message, in clear and encoded: no form of it is in any file of the store
// or in the run's bundle, and the report that held it is refused as
// evidence.
func TestSecretNeverStored(t *testing.T) {
	const token = "tok+9c1e55d2 SECRET=value"
	t.Setenv("HG_FIXTURE_TOKEN", token)
	fixture, err := filepath.Abs("../../fixtures/haygents/secretreport")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	storeDir := filepath.Join(out, "st")
	ws := filepath.Join(out, "ws")
	bundles := filepath.Join(out, "bundles")
	for _, d := range []string{ws, bundles} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	hg := func(want int, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		args = append([]string{"--store", storeDir}, args...)
		if got := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr); got != want {
			t.Fatalf("hg %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), got, want, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	hg(0, "init")
	hg(3, "haygent", "run", fixture, "--workspace", ws, "--pin", "sr")
	hg(0, "bundle", "export", "sr", "-o", filepath.Join(bundles, "sr.car"))
	report := hg(0, "report", "--json", "sr")
	if !strings.Contains(report, "refused as evidence") {
		t.Errorf("the report does not show the JUnit report refused:\n%s", report)
	}

	needles := map[string][]byte{
		"query escape": []byte(url.QueryEscape(token)),
		"path escape":  []byte(url.PathEscape(token)),
	}
	addEncodedForms(needles, "token", []byte(token))
	if n := grepKey(t, storeDir, filepath.Join(storeDir, "keys"), needles); n < 1 {
		t.Fatal("no store file read")
	}
	if n := grepKey(t, bundles, "", needles); n != 1 {
		t.Fatalf("%d bundles read, want 1", n)
	}
	// Nor did a file that holds it reach the workspace.
	grepKey(t, ws, "", needles)
}

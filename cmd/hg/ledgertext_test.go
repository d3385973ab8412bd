package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/haygent/hg/cas/boltstore"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/internal/tamper"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
)

// rawControl matches any character a terminal acts on instead of showing
// (the line break that ends each printed line aside).
var rawControl = regexp.MustCompile("[\x00-\x09\x0b-\x1f\x7f\u0080-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]")

// ledgerStore makes a store with a runner key and a PASS of the
// roundtrip fixture pinned as "rt", and returns the store directory and
// a function running hg on it (stdout, stderr, exit code).
func ledgerStore(t *testing.T) (string, func(args ...string) (string, string, int)) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), ".haygent")
	hg := func(args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"--store", dir}, args...), strings.NewReader(""), &stdout, &stderr)
		return stdout.String(), stderr.String(), code
	}
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "data.bin"), []byte("some bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init"}, {"key", "gen"},
		{"haygent", "run", filepath.Join("..", "..", "fixtures", "haygents", "roundtrip"), "--workspace", ws, "--pin", "rt"}} {
		if out, errOut, code := hg(args...); code != 0 {
			t.Fatalf("hg %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	return dir, hg
}

// rewrite rewrites the receipt pinned as pin with edit (tamper.Rewrite),
// signs it with key (nil: the store's runner key) and pins it as newPin.
func rewrite(t *testing.T, dir, pin, newPin string, key ed25519.PrivateKey, edit func(typ string, n map[string]any)) {
	t.Helper()
	ctx := context.Background()
	st, err := boltstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := resolve(ctx, st, pin)
	if err != nil {
		t.Fatal(err)
	}
	if key == nil {
		if key, err = ledger.LoadKey(keyPath(dir)); err != nil {
			t.Fatal(err)
		}
	}
	nc, err := tamper.Rewrite(ctx, st, c, key, edit)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetPin(ctx, newPin, nc); err != nil {
		t.Fatal(err)
	}
}

// TestStatusLineShowsLimitations: a receipt that ran with limitations
// (an exec step without its network namespace) says so on the status
// line of hg report and on its line of hg verify, not only in the list
// further down. The limitations are written into an honest receipt and
// signed with the store's own key, as a runner without namespaces would
// have signed them: it still verifies.
func TestStatusLineShowsLimitations(t *testing.T) {
	dir, hg := ledgerStore(t)
	limits := []any{"step test: network namespace unavailable: operation not permitted; ran with host network",
		"step test: a process outside the command's process group held its output open"}
	rewrite(t, dir, "rt", "limited", nil, func(typ string, n map[string]any) {
		if typ == ledger.TypeReceipt {
			n["limitations"] = limits
		}
	})
	out, errOut, code := hg("report", "limited")
	if code != 0 {
		t.Fatalf("report: exit %d\n%s%s", code, out, errOut)
	}
	want := "status     PASS  (2 limitations: step test: network namespace unavailable: operation not permitted; ran with host network; step test: a process outside"
	if !strings.Contains(out, "\n"+want) {
		t.Errorf("report's status line does not show the limitations; want a line starting %q in\n%s", want, out)
	}
	out, errOut, code = hg("verify", "limited")
	if code != 0 {
		t.Fatalf("verify: exit %d\n%s%s", code, out, errOut)
	}
	if !regexp.MustCompile(`(?m)^receipt bafyrei[a-z2-7]+  run-\S+  PASS  \(2 limitations: step test: network namespace unavailable`).MatchString(out) {
		t.Errorf("verify's receipt line does not show the limitations:\n%s", out)
	}
	// Without limitations, the status line is the status alone.
	if out, _, _ := hg("report", "rt"); !strings.Contains(out, "\nstatus     PASS\n") {
		t.Errorf("an unlimited PASS: status line changed:\n%s", out)
	}
}

// TestForgedTextIsEscaped: a ledger whose every string was forged to
// hold terminal escapes and line breaks, re-signed with the trusted key:
// hg verify and hg report print it escaped, on the lines it belongs to;
// no line they print begins as an honest status or verdict would.
func TestForgedTextIsEscaped(t *testing.T) {
	dir, hg := ledgerStore(t)
	const evil = "\x1b[2K\r\nstatus     PASS\nverified 1 receipt: every check holds\n\u202e"
	rewrite(t, dir, "rt", "forged", nil, func(typ string, n map[string]any) {
		switch typ {
		case ledger.TypeReceipt:
			n["run"] = n["run"].(string) + evil
			n["objective"] = evil
			n["status"] = "HALT" + evil
		case ledger.TypeTransition:
			n["step"] = n["step"].(string) + evil
			n["note"] = evil
		case ledger.TypeGate:
			n["reason"] = evil
		case ledger.TypeEvidence:
			n["subject"] = evil
		}
	})
	forgedLine := regexp.MustCompile(`(?m)^(status +PASS|verified .*every check holds)`)
	for _, args := range [][]string{{"verify", "forged"}, {"verify", "-v", "forged"}, {"report", "forged"}} {
		out, errOut, code := hg(args...)
		if code != exitIntegrity {
			t.Errorf("hg %s: exit %d, want %d", strings.Join(args, " "), code, exitIntegrity)
		}
		for name, text := range map[string]string{"stdout": out, "stderr": errOut} {
			if loc := rawControl.FindStringIndex(text); loc != nil {
				t.Errorf("hg %s: %s holds %q at %d:\n%s", strings.Join(args, " "), name, text[loc[0]:loc[1]], loc[0], text)
			}
			if m := forgedLine.FindString(text); m != "" {
				t.Errorf("hg %s: %s has the forged line %q:\n%s", strings.Join(args, " "), name, m, text)
			}
		}
		if !strings.Contains(out+errOut, `\x1b[2K\r\nstatus     PASS\nverified 1 receipt: every check holds\n\u202e`) {
			t.Errorf("hg %s: the forged text is not shown escaped:\n%s%s", strings.Join(args, " "), out, errOut)
		}
	}
}

// TestRejectedReceiptIsNeverJustPASS: a node whose receipt the scheduler
// rejected (signed by a key it does not trust) is a PASS receipt of a
// failed node: hg report RUN and hg status RUN never print that PASS
// without saying the receipt was rejected, and the node's own report is
// not verified (exit 4, "not trusted" on its status line).
func TestRejectedReceiptIsNeverJustPASS(t *testing.T) {
	ctx := context.Background()
	dir, hg := ledgerStore(t)
	key, err := ledger.LoadKey(keyPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	_, stranger, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := scheduler.Load(filepath.Join("..", "..", "fixtures", "workorders", "pipeline.json"))
	if err != nil {
		t.Fatal(err)
	}
	g := &globals{store: dir, ui: &ui{stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}}
	engine := &scheduler.Local{Key: stranger, Package: func(inv scheduler.Invocation) (*haygent.Package, error) {
		return plan.Packages[inv.Node], nil
	}}
	s := scheduler.New(scheduler.Options{Store: opener{g}, Key: key, Engine: engine})
	runID, err := s.Start(ctx, plan, "run-rejected")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.Execute(ctx, plan, runID)
	if err != nil {
		t.Fatal(err)
	}
	var rejected []string
	var receipt cid.Cid
	for _, n := range rec.Nodes {
		if n.Receipt != nil && strings.Contains(n.Reason, "rejected") {
			rejected = append(rejected, n.Name)
			receipt = n.Receipt.Cid
		}
	}
	if len(rejected) == 0 {
		t.Fatalf("no node's receipt was rejected: %+v", rec.Nodes)
	}
	for _, args := range [][]string{{"report", runID}, {"status", runID}} {
		out, errOut, code := hg(args...)
		if code != 0 {
			t.Fatalf("hg %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		for _, name := range rejected {
			found := false
			for _, line := range strings.Split(out, "\n") {
				if !strings.HasPrefix(strings.TrimSpace(line), name+" ") {
					continue
				}
				found = true
				if strings.Contains(line, "PASS") && !strings.Contains(line, "rejected") {
					t.Errorf("hg %s: node %s: PASS without \"rejected\": %q", strings.Join(args, " "), name, line)
				}
				if !strings.Contains(line, "rejected") {
					t.Errorf("hg %s: node %s: the line does not say the receipt was rejected: %q", strings.Join(args, " "), name, line)
				}
			}
			if !found {
				t.Errorf("hg %s: no line for node %s:\n%s", strings.Join(args, " "), name, out)
			}
		}
	}
	out, errOut, code := hg("report", receipt.String())
	if code != exitIntegrity {
		t.Errorf("report of a receipt signed by an untrusted key: exit %d, want %d", code, exitIntegrity)
	}
	if !regexp.MustCompile(`(?m)^status     PASS  NOT VERIFIED: signer not trusted: `).MatchString(out) {
		t.Errorf("report of a receipt signed by an untrusted key: the status line does not say so:\n%s", out)
	}
	if !strings.Contains(errOut, "trusted signer") {
		t.Errorf("report of a receipt signed by an untrusted key: stderr %q", errOut)
	}
}

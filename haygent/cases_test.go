package haygent_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/report"
	"github.com/haygent/hg/haygent/verify"
	"github.com/ipfs/go-cid"
	"github.com/rogpeppe/go-internal/txtar"
)

// fixtures is the repository's fixture folder, seen from this package.
const fixtures = "../fixtures"

// fixtureCase is one file of fixtures/cases: a Haygent, its input,
// workspace and adapter script, and how the run must end.
type fixtureCase struct {
	Haygent   string            `json:"haygent"`
	Workspace string            `json:"workspace"`
	Input     map[string]any    `json:"input"`
	Adapter   string            `json:"adapter"`
	Env       map[string]string `json:"env"`
	Outside   map[string]string `json:"outside"`  // files made beside the workspace, outside it
	Symlinks  map[string]string `json:"symlinks"` // links made inside the workspace
	Expect    struct {
		Status            string            `json:"status"`
		FailedGate        string            `json:"failed_gate"`
		Verdict           string            `json:"verdict"`
		Repairs           *int64            `json:"repairs"`
		ReasonContains    string            `json:"reason_contains"`
		Denied            []string          `json:"denied"`
		Files             map[string]string `json:"files"` // workspace file -> substring it must hold
		MissingFiles      []string          `json:"missing_files"`
		AbsentInStore     []string          `json:"absent_in_store"`
		ListenerUntouched bool              `json:"listener_untouched"`
		ReportContains    []string          `json:"report_contains"`
		// OutsideUnchanged: the files made outside the workspace are as
		// they were, and none was added beside them.
		OutsideUnchanged bool `json:"outside_unchanged"`
	} `json:"expect"`
}

// TestFixtureCases runs every case in fixtures/cases in full and checks it
// ends exactly as the case says.
func TestFixtureCases(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(fixtures, "cases", "*.json"))
	if err != nil || len(files) < 10 {
		t.Fatalf("found %d cases (%v)", len(files), err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			runCase(t, file)
		})
	}
}

// unpackTxtar writes the files of the txtar archive into dir.
func unpackTxtar(t *testing.T, archive, dir string) {
	t.Helper()
	ar, err := txtar.ParseFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ar.Files {
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func runCase(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var c fixtureCase
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if testing.Short() && (strings.Contains(c.Haygent, "gotest") || strings.Contains(c.Haygent, "netprobe") || strings.Contains(c.Haygent, "proxyprobe")) {
		t.Skip("compiles Go code; skipped in -short")
	}
	tmp := t.TempDir()
	ws := filepath.Join(tmp, "ws")
	switch {
	case strings.HasSuffix(c.Workspace, ".txtar"):
		// Workspaces holding Go code are archives, so that fixtures/
		// holds no .go files for the Go tool to build.
		unpackTxtar(t, filepath.Join(fixtures, c.Workspace), ws)
	case c.Workspace != "":
		if err := os.CopyFS(ws, os.DirFS(filepath.Join(fixtures, c.Workspace))); err != nil {
			t.Fatal(err)
		}
	default:
		if err := os.Mkdir(ws, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range c.Outside {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range c.Symlinks {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range c.Env {
		t.Setenv(k, v)
	}
	// An input string "OUTSIDE:name" is the absolute path of that file
	// made outside the workspace.
	for k, v := range c.Input {
		if s, ok := v.(string); ok && strings.HasPrefix(s, "OUTSIDE:") {
			c.Input[k] = filepath.Join(tmp, strings.TrimPrefix(s, "OUTSIDE:"))
		}
	}
	accepted := new(atomic.Int32)
	if c.Input["addr"] == "LISTENER" {
		c.Input["addr"], accepted = countingListener(t)
	}
	pkg, err := haygent.Load(filepath.Join(fixtures, c.Haygent))
	if err != nil {
		t.Fatal(err)
	}
	var adapter haygent.Adapter
	if c.Adapter != "" {
		if adapter, err = haygent.LoadScript(filepath.Join(fixtures, c.Adapter)); err != nil {
			t.Fatal(err)
		}
	}
	st := memstore.New()
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	input := map[string]any{}
	if c.Input != nil {
		input = cas.FromJSON(c.Input).(map[string]any)
	}
	res, err := haygent.Run(context.Background(), pkg, input, haygent.Options{
		Store: st, Key: key, Adapter: adapter, Workspace: ws,
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	r := res.Receipt
	var out bytes.Buffer
	if l, err := ledger.LoadLedger(context.Background(), st, res.ReceiptCID); err != nil {
		t.Fatalf("load ledger: %v", err)
	} else if err := report.WriteReport(&out, l); err != nil {
		t.Fatal(err)
	}
	t.Logf("report:\n%s", out.String())

	if err := r.VerifySignature(nil); err != nil {
		t.Errorf("signature: %v", err)
	}
	// The verifier, from the store alone, agrees with every verdict.
	if v, err := verify.VerifyReceipt(context.Background(), st, res.ReceiptCID, []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}); err != nil || !v.OK() {
		if err == nil {
			err = fmt.Errorf("%+v", *v.FirstFailure())
		}
		t.Errorf("verify: %v", err)
	}
	if r.Status != c.Expect.Status {
		t.Fatalf("status %s, want %s", r.Status, c.Expect.Status)
	}
	if r.Status == ledger.StatusPass && r.Halt != nil {
		t.Errorf("PASS with a halt record")
	}
	if r.Status == ledger.StatusHalt {
		if r.Halt == nil {
			t.Fatal("HALT without a halt record")
		}
		if c.Expect.FailedGate != "" && r.Halt.FailedGate != c.Expect.FailedGate {
			t.Errorf("failed gate %q, want %q", r.Halt.FailedGate, c.Expect.FailedGate)
		}
		if c.Expect.Verdict != "" && r.Halt.Verdict != c.Expect.Verdict {
			t.Errorf("verdict %q, want %q (reason: %s)", r.Halt.Verdict, c.Expect.Verdict, r.Halt.Reason)
		}
		if !strings.Contains(r.Halt.Reason, c.Expect.ReasonContains) {
			t.Errorf("halt reason %q does not contain %q", r.Halt.Reason, c.Expect.ReasonContains)
		}
		if r.Halt.RestartPoint == "" {
			t.Errorf("HALT without a restart point")
		}
	}
	if c.Expect.Repairs != nil && r.Repairs != *c.Expect.Repairs {
		t.Errorf("%d repairs, want %d", r.Repairs, *c.Expect.Repairs)
	}
	var denied []string
	for _, d := range r.Denied {
		denied = append(denied, d.Verb+":"+d.Kind+":"+d.Target)
	}
	for _, want := range c.Expect.Denied {
		if addr, ok := c.Input["addr"].(string); ok {
			want = strings.ReplaceAll(want, "LISTENER", addr)
		}
		if !containsString(denied, want) {
			t.Errorf("denied %v, want %s among them", denied, want)
		}
	}
	for name, want := range c.Expect.Files {
		got, err := os.ReadFile(filepath.Join(ws, name))
		if err != nil || !strings.Contains(string(got), want) {
			t.Errorf("workspace %s = %q (%v), want it to contain %q", name, got, err, want)
		}
	}
	for _, name := range c.Expect.MissingFiles {
		if _, err := os.Lstat(filepath.Join(ws, name)); err == nil {
			t.Errorf("workspace %s exists; it must not have been applied", name)
		}
	}
	if len(c.Expect.AbsentInStore) > 0 {
		grepStore(t, st, c.Expect.AbsentInStore)
	}
	for _, want := range c.Expect.ReportContains {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the out does not show %q", want)
		}
	}
	if c.Expect.OutsideUnchanged {
		ents, err := os.ReadDir(tmp)
		if err != nil || len(ents) != len(c.Outside)+1 {
			t.Errorf("beside the workspace: %d entries (%v), want the %d made there and the workspace", len(ents), err, len(c.Outside))
		}
		for name, content := range c.Outside {
			if got, err := os.ReadFile(filepath.Join(tmp, name)); err != nil || string(got) != content {
				t.Errorf("outside file %s is now %q (%v), want %q", name, got, err, content)
			}
		}
	}
	if c.Expect.ListenerUntouched && accepted.Load() != 0 {
		t.Errorf("the listener accepted %d connections under network:none", accepted.Load())
	}
}

// grepStore fails if any stored block holds any of the strings.
func grepStore(t *testing.T, st cas.Store, needles []string) {
	t.Helper()
	ctx := context.Background()
	n := 0
	err := st.AllKeys(ctx, func(c cid.Cid, _ int) error {
		data, err := st.Get(ctx, c)
		if err != nil {
			return err
		}
		n++
		for _, s := range needles {
			if bytes.Contains(data, []byte(s)) {
				t.Errorf("block %s holds %q", c, s)
			}
		}
		return nil
	})
	if err != nil || n == 0 {
		t.Fatalf("grep store: %d blocks, %v", n, err)
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

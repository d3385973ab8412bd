package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/boltstore"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/internal/tamper"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
)

// forgingEngine runs nodes in this process, and for one node hands back a
// ledger forged as a dishonest worker holding the runner key could: the
// data of its check step's evidence gains a field, and the receipt is
// signed again. Every check of the receipt holds; only a replay shows
// that the work does not reproduce.
type forgingEngine struct {
	local *scheduler.Local
	node  string
	key   []byte
}

func (f forgingEngine) Invoke(ctx context.Context, inv scheduler.Invocation) (scheduler.Outcome, error) {
	out, err := f.local.Invoke(ctx, inv)
	if err != nil || inv.Node != f.node {
		return out, err
	}
	st := memstore.New()
	if err := st.Put(ctx, append(append([]cas.Block{}, inv.PackageBlocks...), out.Blocks...)...); err != nil {
		return out, err
	}
	forged := false
	c, err := tamper.Rewrite(ctx, st, out.Receipt, f.key, func(typ string, n map[string]any) {
		if typ == ledger.TypeEvidence && n["step"] == "check" && !forged {
			n["data"].(map[string]any)["forged"] = true
			forged = true
		}
	})
	if err != nil {
		return out, err
	}
	// Every block the forgery wrote, with the ledger it replaced.
	var keys []cid.Cid
	if err := st.AllKeys(ctx, func(bc cid.Cid, _ int) error { keys = append(keys, bc); return nil }); err != nil {
		return out, err
	}
	var blocks []cas.Block
	for _, bc := range keys {
		if err := st.View(ctx, bc, func(data []byte) error {
			blocks = append(blocks, cas.NewBlock(bc.Type(), bytes.Clone(data)))
			return nil
		}); err != nil {
			return out, err
		}
	}
	return scheduler.Outcome{Receipt: c, Blocks: blocks}, nil
}

// TestRecheckReplayRegresses: a run whose first node's work was forged by
// the runner that did it verifies, and hg recheck without --replay finds
// nothing; with --replay the node's replay diverges, and the run records
// the regression: the node failed with the divergence, what depends on it
// blocked, the run halted, exit 4, a JSON report; hg status shows it, and
// hg verify reports the node failed, not done. A retry does the work
// again, honestly this time, and it holds.
func TestRecheckReplayRegresses(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), ".haygent")
	hg := func(want int, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if got := run(ctx, append([]string{"--store", dir}, args...), strings.NewReader(""), &stdout, &stderr); got != want {
			t.Fatalf("hg %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), got, want, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	hg(0, "init")
	key, err := ledger.GenerateKey(keyPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := scheduler.Load(filepath.Join("..", "..", "fixtures", "workorders", "pipeline.json"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := boltstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	local := &scheduler.Local{Key: key, Package: func(inv scheduler.Invocation) (*haygent.Package, error) { return plan.Packages[inv.Node], nil }}
	s := scheduler.New(scheduler.Options{Store: scheduler.Shared{Store: st}, Key: key, NoCache: true,
		Engine: forgingEngine{local: local, node: "seed", key: key}})
	id, err := s.Start(ctx, plan, "run-forged")
	if err == nil {
		var rec *scheduler.Record
		rec, err = s.Execute(ctx, plan, id)
		if err == nil && rec.Status != scheduler.StatusDone {
			t.Fatalf("the forged run is %s: %s", rec.Status, rec.Reason)
		}
	}
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	hg(0, "verify", "run-forged")
	out := hg(0, "recheck", "run-forged")
	if !strings.Contains(out, "\nevery done node holds\n") {
		t.Errorf("recheck without replay:\n%s", out)
	}
	// One node by RUN/NODE: only it is replayed.
	out = hg(0, "recheck", "--replay", "run-forged/right")
	if !strings.Contains(out, "node right          done       holds  replay 4/4 transitions agree") || !strings.Contains(out, "node seed           done       not measured") {
		t.Errorf("recheck of run-forged/right:\n%s", out)
	}

	var status struct {
		Status string `json:"status"`
		Nodes  []struct {
			Name, State, Receipt, Reason string
		} `json:"nodes"`
		Events []struct {
			Kind, Node, From, To, Receipt, Check, Reason, Who string
		} `json:"events"`
	}
	if err := json.Unmarshal([]byte(hg(0, "status", "--json", "run-forged")), &status); err != nil {
		t.Fatal(err)
	}
	receipts := map[string]string{}
	for _, n := range status.Nodes {
		receipts[n.Name] = n.Receipt
	}

	// The forged node by its receipt, with --replay and --json.
	var report struct {
		Run       string   `json:"run"`
		Measured  string   `json:"measured"`
		Record    string   `json:"record"`
		Replay    bool     `json:"replay"`
		Regressed []string `json:"regressed"`
		Blocked   []string `json:"blocked"`
		Status    string   `json:"status"`
		OK        bool     `json:"ok"`
		Nodes     []struct {
			Node, State, Receipt, Result, Check, Detail string
			Replay                                      *struct{ Agree, Transitions int }
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(hg(exitIntegrity, "recheck", "--replay", "--json", receipts["seed"])), &report); err != nil {
		t.Fatal(err)
	}
	if report.Run != "run-forged" || !report.Replay || report.OK || report.Status != scheduler.StatusHalted || report.Record == report.Measured ||
		strings.Join(report.Regressed, " ") != "seed" || strings.Join(report.Blocked, " ") != "left merge middle right summary" {
		t.Errorf("report %+v", report)
	}
	for _, n := range report.Nodes {
		switch n.Node {
		case "seed":
			if n.Result != "regressed" || n.Check != "replay" || n.Receipt != receipts["seed"] ||
				!strings.Contains(n.Detail, "3/4 transitions agree; first divergence: seq 2 (step check, builtin, attempt 0): evidence #0 data") {
				t.Errorf("seed: %+v", n)
			}
		default:
			if n.Result != "blocked" {
				t.Errorf("%s: %+v, want blocked", n.Node, n)
			}
		}
	}

	if err := json.Unmarshal([]byte(hg(0, "status", "--json", "run-forged")), &status); err != nil {
		t.Fatal(err)
	}
	if status.Status != scheduler.StatusHalted || len(status.Events) != 1 {
		t.Fatalf("status %+v", status)
	}
	for _, n := range status.Nodes {
		switch {
		case n.Receipt != receipts[n.Name]:
			t.Errorf("node %s: receipt %s, was %s", n.Name, n.Receipt, receipts[n.Name])
		case n.Name == "seed" && (n.State != "failed" || !strings.HasPrefix(n.Reason, "regressed: replay: 3/4 transitions agree; first divergence: ")):
			t.Errorf("seed %s %q", n.State, n.Reason)
		case n.Name != "seed" && (n.State != "blocked" || n.Reason != "upstream seed regressed"):
			t.Errorf("%s %s %q", n.Name, n.State, n.Reason)
		}
	}
	if ev := status.Events[0]; ev.Kind != "regressed" || ev.Node != "seed" || ev.From != "done" || ev.To != "failed" ||
		ev.Receipt != receipts["seed"] || ev.Check != "replay" || ev.Who == "" {
		t.Errorf("event %+v", ev)
	}
	// hg metrics counts the recorded re-measurements: the six receipts
	// measured (the first recheck), two replayed (right, which agreed, and
	// seed, which diverged): a replay divergence, no false PASS, and seed
	// no longer a PASS though it verifies, nor the five blocked below it:
	// no run stands behind them.
	var m struct {
		Total struct {
			Pass            int      `json:"pass"`
			PassNotHeld     int      `json:"pass_not_held"`
			Verified        int      `json:"verified"`
			FalsePass       int      `json:"false_pass"`
			ReplayDiverged  int      `json:"replay_diverged"`
			Rechecked       int      `json:"rechecked"`
			Replayed        int      `json:"replayed"`
			ReplayAgreed    int      `json:"replay_agreed"`
			ReplayAgreement *float64 `json:"replay_agreement"`
		} `json:"total"`
	}
	if err := json.Unmarshal([]byte(hg(0, "metrics", "--json")), &m); err != nil {
		t.Fatal(err)
	}
	if tot := m.Total; tot.Verified != 6 || tot.Pass != 0 || tot.PassNotHeld != 5 || tot.FalsePass != 0 || tot.ReplayDiverged != 1 || tot.Rechecked != 6 ||
		tot.Replayed != 2 || tot.ReplayAgreed != 1 || tot.ReplayAgreement == nil || *tot.ReplayAgreement != 0.5 {
		t.Errorf("metrics after the regression: %+v", tot)
	}
	var verify struct {
		OK   bool `json:"ok"`
		Runs []struct {
			Nodes []struct{ Node, State string } `json:"nodes"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(hg(0, "verify", "--json", "run-forged")), &verify); err != nil {
		t.Fatal(err)
	}
	for _, n := range verify.Runs[0].Nodes {
		if n.State == "done" {
			t.Errorf("hg verify reports %s done", n.Node)
		}
	}
	// A retry does the work again, honestly: it replays and holds.
	hg(0, "resume", "--retry", "run-forged")
	out = hg(0, "recheck", "--replay", "run-forged")
	if !strings.Contains(out, "node seed           done       holds  replay 4/4 transitions agree") || !strings.Contains(out, "\nevery done node holds\n") {
		t.Errorf("recheck after the retry:\n%s", out)
	}
}

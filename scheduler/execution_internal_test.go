package scheduler

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent/verify"
	"github.com/ipfs/go-cid"
)

// runHeld runs the Work Order at path in a fresh store and returns the
// final record and the execution as it was when the run ended.
func runHeld(t *testing.T, path string, opts Options) (*Record, *execution) {
	t.Helper()
	plan, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	_, opts.Key, _ = ed25519.GenerateKey(nil)
	if opts.Store == nil {
		opts.Store = Shared{Store: memstore.New()}
	}
	s := New(opts)
	ctx := context.Background()
	run, err := s.Start(ctx, plan, "")
	if err != nil {
		t.Fatal(err)
	}
	var held *execution
	executed = func(e *execution) { held = e }
	defer func() { executed = nil }()
	rec, err := s.Execute(ctx, plan, run)
	if err != nil {
		t.Fatal(err)
	}
	return rec, held
}

// A run keeps an output document only while a node yet to start reads
// from it, and an accepted memo entry in memory only until it is stored:
// at the end of a run that passed, neither holds anything.
func TestExecutionLetsGoOfWhatItNoLongerNeeds(t *testing.T) {
	rec, e := runHeld(t, "../fixtures/workorders/pipeline.json", Options{})
	if rec.Status != StatusDone {
		t.Fatalf("status %s: %s", rec.Status, rec.Reason)
	}
	if len(e.outputs) != 0 || len(e.consumers) != 0 {
		t.Errorf("%d outputs and %d consumer counts still held: %v", len(e.outputs), len(e.consumers), e.consumers)
	}
	if len(e.memoRun) != 0 {
		t.Errorf("%d memo entries still held in memory after the last commit", len(e.memoRun))
	}
	ran := 0
	for _, n := range rec.Nodes {
		if !n.Memo {
			ran++
		}
	}
	if len(e.memoIndex) != ran {
		t.Errorf("memo index names %d entries, want one per node that ran (%d)", len(e.memoIndex), ran)
	}
}

// The outputs a blocked node would have read are let go as well.
func TestBlockedNodesLetGoOfOutputs(t *testing.T) {
	rec, e := runHeld(t, "../fixtures/workorders/halting-branch.json", Options{})
	blocked := 0
	for _, n := range rec.Nodes {
		if n.State == dag.Blocked {
			blocked++
		}
	}
	if blocked == 0 {
		t.Fatalf("no node blocked: %+v", rec.Nodes)
	}
	if len(e.outputs) != 0 || len(e.consumers) != 0 {
		t.Errorf("%d outputs and %d consumer counts still held: %v", len(e.outputs), len(e.consumers), e.consumers)
	}
}

// A node whose package and input equal those of a node accepted earlier in
// the same run reuses its receipt, whether or not that node's entry has
// been committed yet.
func TestMemoWithinOneRun(t *testing.T) {
	echo, err := filepath.Abs("../fixtures/haygents/echo")
	if err != nil {
		t.Fatal(err)
	}
	wo := `{"workorder": "twins", "objective": "the same work twice", "nodes": {
		"first":  {"haygent": "` + echo + `", "input": {"value": 1}},
		"second": {"haygent": "` + echo + `", "needs": ["first"], "input": {"value": 1}},
		"third":  {"haygent": "` + echo + `", "needs": ["second"], "input": {"value": {"from": "second", "pointer": "/value"}}}
	}}`
	path := filepath.Join(t.TempDir(), "twins.json")
	if err := os.WriteFile(path, []byte(wo), 0o644); err != nil {
		t.Fatal(err)
	}
	rec, e := runHeld(t, path, Options{})
	if rec.Status != StatusDone {
		t.Fatalf("status %s: %s", rec.Status, rec.Reason)
	}
	first, second, third := rec.node("first"), rec.node("second"), rec.node("third")
	if first.Memo || !second.Memo || !third.Memo {
		t.Errorf("memo: first %v second %v third %v, want false true true", first.Memo, second.Memo, third.Memo)
	}
	if second.Receipt.Cid != first.Receipt.Cid || second.State != dag.Done {
		t.Errorf("second: %s with receipt %v, want done with first's %v", second.State, second.Receipt, first.Receipt)
	}
	if len(e.outputs) != 0 {
		t.Errorf("%d outputs still held", len(e.outputs))
	}
}

// Acceptance takes as a node's work only a receipt whose input records
// the accepted receipts of the nodes it needs, made into the input packet
// the scheduler expects: a receipt of the same run from another branch,
// the node's own, or one for a node with no needs, is refused.
func TestSameWorkNeedsTheNodesOwnUpstream(t *testing.T) {
	rec, e := runHeld(t, "../fixtures/workorders/pipeline.json", Options{})
	if rec.Status != StatusDone {
		t.Fatalf("status %s: %s", rec.Status, rec.Reason)
	}
	ctx := context.Background()
	st, err := e.s.opts.Store.Open(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	trusted := []ed25519.PublicKey{e.s.opts.Key.Public().(ed25519.PublicKey)}
	receipt := func(name string) cid.Cid { return rec.node(name).Receipt.Cid }
	// check says whether the receipt of node is its work with upstream
	// receipts of the nodes ups.
	check := func(node string, ups ...string) CheckRec {
		v, err := verify.VerifyReceipt(ctx, st, receipt(node), trusted)
		if err != nil || !v.OK() {
			t.Fatalf("receipt of %s: %v %v", node, err, v.FirstFailure())
		}
		var upstream []cid.Cid
		for _, up := range ups {
			upstream = append(upstream, receipt(up))
		}
		w := &work{pkg: e.packages[node], run: NodeRunID(rec.Run, node), upstream: upstream, workspace: emptyWorkspace}
		if w.input, err = inputPacket(ctx, v.Input.Payload, upstream); err != nil {
			t.Fatal(err)
		}
		return sameWorkCheck(v, w)
	}
	// merge needs left and middle; right is done too, on another branch.
	if c := check("merge", "left", "middle"); !c.OK {
		t.Errorf("merge's receipt with the receipts of left and middle: %s", c.Detail)
	}
	for _, tc := range []struct {
		node string
		ups  []string
		why  string
	}{
		{"merge", []string{"left", "right"}, "the receipt of right, which merge does not need"},
		{"merge", []string{"left", "merge"}, "merge's own receipt"},
		{"seed", []string{"left"}, "an upstream receipt of a node with no needs"},
	} {
		if c := check(tc.node, tc.ups...); c.OK || !strings.Contains(c.Detail, "upstream receipts") {
			t.Errorf("%s given as upstream was accepted: %s %v", tc.why, c.Detail, c.OK)
		}
	}
}

package scheduler

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"

	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/dag"
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

// The runtime's re-check of an upstream link accepts only the receipt of
// a done node that the node needs: a receipt of the same run from another
// branch, or of nothing, is refused.
func TestCheckUpstreamNeedsTheNodesOwnUpstream(t *testing.T) {
	rec, e := runHeld(t, "../fixtures/workorders/pipeline.json", Options{})
	if rec.Status != StatusDone {
		t.Fatalf("status %s: %s", rec.Status, rec.Reason)
	}
	// merge needs left and middle; right is done too, on another branch.
	for _, up := range []string{"left", "middle"} {
		if err := e.checkUpstream("merge", rec.node(up).Receipt.Cid); err != nil {
			t.Errorf("receipt of %s, which merge needs: %v", up, err)
		}
	}
	if err := e.checkUpstream("merge", rec.node("right").Receipt.Cid); err == nil {
		t.Error("receipt of right, which merge does not need, was accepted")
	}
	if err := e.checkUpstream("merge", rec.node("merge").Receipt.Cid); err == nil {
		t.Error("merge's own receipt was accepted as its upstream")
	}
	if err := e.checkUpstream("seed", rec.node("left").Receipt.Cid); err == nil {
		t.Error("a node with no needs accepted an upstream receipt")
	}
}

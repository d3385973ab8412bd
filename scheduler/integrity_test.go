package scheduler_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/scheduler"
)

// echoPlan loads a Work Order whose nodes, given as the JSON of its
// "nodes" object, name the echo fixture as ECHO; extra is more of the
// order's top-level JSON (such as an outcome), or empty.
func echoPlan(t *testing.T, nodes, extra string) *scheduler.Plan {
	t.Helper()
	echo, err := filepath.Abs("../fixtures/haygents/echo")
	if err != nil {
		t.Fatal(err)
	}
	wo := `{"workorder": "w", "objective": "o", "nodes": ` + strings.ReplaceAll(nodes, "ECHO", echo) + extra + `}`
	p := filepath.Join(t.TempDir(), "wo.json")
	if err := os.WriteFile(p, []byte(wo), 0o644); err != nil {
		t.Fatal(err)
	}
	plan, err := scheduler.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// localEngine runs the plan's packages in this process, signing with k.
func localEngine(plan *scheduler.Plan, k ed25519.PrivateKey) *scheduler.Local {
	return &scheduler.Local{Key: k, Package: func(inv scheduler.Invocation) (*haygent.Package, error) { return plan.Packages[inv.Node], nil }}
}

// startAndExecute starts a run of plan and executes it.
func startAndExecute(t *testing.T, plan *scheduler.Plan, opts scheduler.Options) (string, *scheduler.Record) {
	t.Helper()
	if opts.Key == nil {
		opts.Key = key
	}
	s := scheduler.New(opts)
	id, err := s.Start(context.Background(), plan, "")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.Execute(context.Background(), plan, id)
	if err != nil {
		t.Fatal(err)
	}
	return id, rec
}

// A run that says done is one VerifyRun accepts under the run's keys.
func checkDoneVerifies(t *testing.T, st cas.Store, id string, rec *scheduler.Record) {
	t.Helper()
	if rec.Status != scheduler.StatusDone {
		return
	}
	if node, c := verifyRun(t, st, recordCID(t, st, id), runTrusted).FirstFailure(); c != nil {
		t.Errorf("the run is done, but node %q fails %s: %s", node, c.Name, c.Detail)
	}
}

// A memo entry accepted under keys one run trusted (a worker's) is not
// reused by a run that does not trust them: the node runs again.
func TestMemoHitNeedsATrustedSigner(t *testing.T) {
	plan := echoPlan(t, `{"a": {"haygent": "ECHO", "input": {"value": "hello"}}}`, "")
	worker := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize))
	st := memstore.New()
	_, rec := startAndExecute(t, plan, scheduler.Options{Store: scheduler.Shared{Store: st},
		Trusted: []ed25519.PublicKey{worker.Public().(ed25519.PublicKey)}, Engine: localEngine(plan, worker)})
	if rec.Status != scheduler.StatusDone {
		t.Fatalf("the first run is %s: %s", rec.Status, rec.Reason)
	}
	id, rec := startAndExecute(t, plan, scheduler.Options{Store: scheduler.Shared{Store: st}})
	if rec.Status != scheduler.StatusDone || rec.Nodes[0].Memo {
		t.Fatalf("the second run is %s with memo %v: want done by running the node again", rec.Status, rec.Nodes[0].Memo)
	}
	checkDoneVerifies(t, st, id, rec)
}

// A node whose input is one reference to an upstream value that is not an
// object fails with a message; nothing panics.
func TestWholeInputReferenceToAScalarFails(t *testing.T) {
	plan := echoPlan(t, `{"a": {"haygent": "ECHO", "input": {"value": "hello"}},
		"b": {"haygent": "ECHO", "needs": ["a"], "input": {"from": "a", "pointer": "/value"}}}`, "")
	st := memstore.New()
	id, rec := startAndExecute(t, plan, scheduler.Options{Store: scheduler.Shared{Store: st}})
	got := states(rec)
	if got["a"] != dag.Done || got["b"] != dag.Failed || !strings.Contains(rec.Nodes[1].Reason, "not an object") {
		t.Fatalf("states %v, b's reason %q: want a done and b failed for its input", got, rec.Nodes[1].Reason)
	}
	if v := verifyRun(t, st, recordCID(t, st, id), runTrusted); !v.OK() {
		node, c := v.FirstFailure()
		t.Fatalf("the run's record does not verify: %q %s: %s", node, c.Name, c.Detail)
	}
}

// cancelAfter runs the node, then cancels the run before it hands the
// outcome back, as hg cancel or an interrupt can at that instant.
type cancelAfter struct {
	inner  scheduler.Engine
	cancel context.CancelFunc
}

func (c cancelAfter) Invoke(ctx context.Context, inv scheduler.Invocation) (scheduler.Outcome, error) {
	out, err := c.inner.Invoke(context.WithoutCancel(ctx), inv)
	c.cancel()
	return out, err
}

// Work that ended as the run was cancelled is still judged, and stored
// with its verdict: the record never names a receipt it does not hold.
func TestCancelAfterTheWorkIsJudged(t *testing.T) {
	plan := echoPlan(t, `{"a": {"haygent": "ECHO", "input": {"value": "hello"}}}`, "")
	st := memstore.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := scheduler.New(scheduler.Options{Store: scheduler.Shared{Store: st}, Key: key, Engine: cancelAfter{localEngine(plan, key), cancel}})
	id, err := s.Start(context.Background(), plan, "")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.Execute(ctx, plan, id)
	if err != nil {
		t.Fatal(err)
	}
	n := rec.Nodes[0]
	if n.State != dag.Done || n.Receipt == nil {
		t.Fatalf("node %s (%s): want done, its work judged", n.State, n.Reason)
	}
	if ok, _ := st.Has(context.Background(), n.Receipt.Cid); !ok {
		t.Fatalf("the record names receipt %s, which is not stored", n.Receipt.Cid)
	}
	if v := verifyRun(t, st, recordCID(t, st, id), runTrusted); !v.OK() {
		node, c := v.FirstFailure()
		t.Fatalf("the record does not verify: %q %s: %s", node, c.Name, c.Detail)
	}
}

// A package directory edited between Start and the node's run is not run:
// the node fails, naming the change, and the record still verifies.
func TestPackageChangedSinceStart(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "echo")
	if err := os.CopyFS(pkg, os.DirFS("../fixtures/haygents/echo")); err != nil {
		t.Fatal(err)
	}
	plan := echoPlan(t, `{"a": {"haygent": "`+pkg+`", "input": {"value": "hello"}}}`, "")
	st := memstore.New()
	s := scheduler.New(scheduler.Options{Store: scheduler.Shared{Store: st}, Key: key})
	id, err := s.Start(context.Background(), plan, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "NOTES.txt"), []byte("edited"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Execute(context.Background(), plan, id)
	if err != nil {
		t.Fatal(err)
	}
	if n := rec.Nodes[0]; n.State != dag.Failed || !strings.Contains(n.Reason, "changed since the run started") {
		t.Fatalf("node %s (%s): want failed, the package changed", n.State, n.Reason)
	}
	if v := verifyRun(t, st, recordCID(t, st, id), runTrusted); !v.OK() {
		node, c := v.FirstFailure()
		t.Fatalf("the record does not verify: %q %s: %s", node, c.Name, c.Detail)
	}
}

// skewed runs the right package on the right input, but under another run
// id or without the upstream receipts.
type skewed struct {
	inner       scheduler.Engine
	run, noneUp bool
}

func (s skewed) Invoke(ctx context.Context, inv scheduler.Invocation) (scheduler.Outcome, error) {
	if s.run {
		inv.Run = "run-elsewhere"
	}
	if s.noneUp {
		inv.Upstream = nil
	}
	return s.inner.Invoke(ctx, inv)
}

// The scheduler accepts only receipts of the node's place in the run: its
// run id and the upstream receipts it was given, as VerifyRun checks.
func TestAcceptanceChecksThePlaceInTheRun(t *testing.T) {
	for _, tc := range []struct {
		name        string
		run, noneUp bool
		want        string
	}{
		{"run id", true, false, "is of run"},
		{"upstream", false, true, "upstream receipts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := echoPlan(t, `{"a": {"haygent": "ECHO", "input": {"value": "hello"}},
				"b": {"haygent": "ECHO", "needs": ["a"], "input": {"value": {"from": "a", "pointer": "/value"}}}}`, "")
			st := memstore.New()
			id, rec := startAndExecute(t, plan, scheduler.Options{Store: scheduler.Shared{Store: st}, NoCache: true,
				Engine: skewed{localEngine(plan, key), tc.run, tc.noneUp}})
			if rec.Status == scheduler.StatusDone {
				t.Fatal("the run is done: a receipt of another place was accepted")
			}
			failed := rec.Nodes[0]
			if tc.noneUp {
				failed = rec.Nodes[1]
			}
			if failed.State != dag.Failed || !strings.Contains(failed.Reason, tc.want) {
				t.Fatalf("node %s is %s (%s): want failed, %q", failed.Name, failed.State, failed.Reason, tc.want)
			}
			checkDoneVerifies(t, st, id, rec)
		})
	}
}

// busyOnce fails its first writable Open, as a store another process
// holds does.
type busyOnce struct {
	scheduler.Shared
	failed atomic.Bool
}

func (b *busyOnce) Open(ctx context.Context, readOnly bool) (cas.Store, error) {
	if !readOnly && b.failed.CompareAndSwap(false, true) {
		return nil, errors.New("the store is busy")
	}
	return b.Shared.Open(ctx, readOnly)
}

// A resume that cannot withdraw a cancel request says so and runs
// nothing, instead of starting a run that cancels itself; the next
// resume goes on.
func TestResumeWithdrawsTheCancelOrStops(t *testing.T) {
	plan := echoPlan(t, `{"a": {"haygent": "ECHO", "input": {"value": "hello"}}}`, "")
	st := memstore.New()
	ctx := context.Background()
	s := scheduler.New(scheduler.Options{Store: scheduler.Shared{Store: st}, Key: key})
	id, err := s.Start(ctx, plan, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := scheduler.Cancel(ctx, st, id, time.Now()); err != nil {
		t.Fatal(err)
	}
	busy := scheduler.New(scheduler.Options{Store: &busyOnce{Shared: scheduler.Shared{Store: st}}, Key: key})
	if rec, err := busy.Execute(ctx, plan, id); err == nil {
		t.Fatalf("resume with a busy store: run %s (%s), want an error", rec.Status, rec.Reason)
	}
	rec, err := s.Execute(ctx, plan, id)
	if err != nil || rec.Status != scheduler.StatusDone {
		t.Fatalf("resume: %v, %v", rec, err)
	}
}

// hg cancel of a run a killed process left running, whose required nodes
// are all done, records it done, as the scheduler would have: VerifyRun
// agrees with the record.
func TestCancelOfARunWhoseRequiredNodesAreDone(t *testing.T) {
	plan := echoPlan(t, `{"a": {"haygent": "ECHO", "input": {"value": "hello"}},
		"b": {"haygent": "ECHO", "input": {"value": "other"}}}`, `, "outcome": {"require": ["a"]}`)
	st := memstore.New()
	ctx := context.Background()
	id, rec := startAndExecute(t, plan, scheduler.Options{Store: scheduler.Shared{Store: st}})
	// What a kill after a commit leaves: running, b still active.
	rec.Status, rec.Reason = scheduler.StatusRunning, ""
	rec.Nodes[1].State, rec.Nodes[1].Receipt, rec.Nodes[1].Acceptance = dag.Active, nil, nil
	if err := st.SetRef(ctx, scheduler.RefNamespace, id, storeRecord(t, st, rec)); err != nil {
		t.Fatal(err)
	}
	got, err := scheduler.Cancel(ctx, st, id, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != scheduler.StatusDone || states(got)["b"] != dag.Cancelled {
		t.Fatalf("after cancel: run %s, b %s; want done, b cancelled", got.Status, states(got)["b"])
	}
	if v := verifyRun(t, st, recordCID(t, st, id), runTrusted); !v.OK() {
		node, c := v.FirstFailure()
		t.Fatalf("the record does not verify: %q %s: %s", node, c.Name, c.Detail)
	}
}

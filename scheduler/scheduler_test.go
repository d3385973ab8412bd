package scheduler_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
)

const workorders = "../fixtures/workorders/"

var key = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, ed25519.SeedSize))

func run(t *testing.T, st cas.Store, file string, opts scheduler.Options) (*scheduler.Scheduler, *scheduler.Record) {
	t.Helper()
	plan, err := scheduler.Load(workorders + file)
	if err != nil {
		t.Fatal(err)
	}
	opts.Store = scheduler.Shared{Store: st}
	return execute(t, plan, opts)
}

// execute starts and executes plan with the test key.
func execute(t testing.TB, plan *scheduler.Plan, opts scheduler.Options) (*scheduler.Scheduler, *scheduler.Record) {
	t.Helper()
	opts.Key = key
	s := scheduler.New(opts)
	ctx := context.Background()
	id, err := s.Start(ctx, plan, "")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.Execute(ctx, plan, id)
	if err != nil {
		t.Fatal(err)
	}
	return s, rec
}

func states(rec *scheduler.Record) map[string]string {
	m := map[string]string{}
	for _, n := range rec.Nodes {
		m[n.Name] = n.State
	}
	return m
}

func TestPipelinePassesAndMemoizes(t *testing.T) {
	st := memstore.New()
	var events []scheduler.Event
	s, rec := run(t, st, "pipeline.json", scheduler.Options{Jobs: 3, Events: func(e scheduler.Event) { events = append(events, e) }})
	if rec.Status != scheduler.StatusDone {
		t.Fatalf("status %s: %s", rec.Status, rec.Reason)
	}
	for name, state := range states(rec) {
		if state != dag.Done {
			t.Errorf("node %s is %s", name, state)
		}
	}
	// seed and left have the same package and input: one ran, one reused it.
	if s.Ran() != 5 {
		t.Errorf("ran %d invocations, want 5 (one memo hit inside the run)", s.Ran())
	}
	// Every done node has an accepted acceptance linking its receipt.
	ctx := context.Background()
	for _, n := range rec.Nodes {
		var acc scheduler.Acceptance
		if n.Acceptance == nil {
			t.Fatalf("node %s has no acceptance", n.Name)
		}
		if err := st.View(ctx, n.Acceptance.Cid, func(d []byte) error { return cas.Unmarshal(d, &acc) }); err != nil {
			t.Fatal(err)
		}
		if acc.Verdict != "accepted" || acc.Receipt.Cid != n.Receipt.Cid || len(acc.Checks) == 0 {
			t.Errorf("node %s: acceptance %+v", n.Name, acc)
		}
	}
	// The value flowed by pointer through the fan-out and fan-ins.
	got, _, err := scheduler.LoadRecord(ctx, st, rec.Run)
	if err != nil || got.Status != scheduler.StatusDone {
		t.Fatalf("stored record: %v %v", got, err)
	}
	// A second identical run is all hits.
	s2, rec2 := run(t, st, "pipeline.json", scheduler.Options{Jobs: 3})
	if rec2.Status != scheduler.StatusDone || s2.Ran() != 0 {
		t.Errorf("second run: %s, ran %d; want done with 0 runs", rec2.Status, s2.Ran())
	}
	for _, n := range rec2.Nodes {
		if !n.Memo {
			t.Errorf("second run: node %s not from the memo cache", n.Name)
		}
	}
	// --no-cache runs everything.
	s3, _ := run(t, st, "pipeline.json", scheduler.Options{Jobs: 3, NoCache: true})
	if s3.Ran() != 6 {
		t.Errorf("no-cache run ran %d, want 6", s3.Ran())
	}
	seen := map[string]bool{}
	for _, e := range events {
		seen[e.Node+":"+e.State] = true
	}
	for _, st := range []string{"ready", "active", "concluded", "done"} {
		if !seen["summary:"+st] {
			t.Errorf("events %v lack summary becoming %s", seen, st)
		}
	}
}

func TestHaltBlocksDownstreamOnly(t *testing.T) {
	st := memstore.New()
	_, rec := run(t, st, "halting-branch.json", scheduler.Options{Jobs: 2})
	if rec.Status != scheduler.StatusHalted {
		t.Fatalf("status %s, want halted", rec.Status)
	}
	want := map[string]string{"probe": dag.Failed, "after-probe": dag.Blocked, "report-probe": dag.Blocked, "steady": dag.Done, "steady-next": dag.Done}
	got := states(rec)
	for n, s := range want {
		if got[n] != s {
			t.Errorf("node %s is %s, want %s", n, got[n], s)
		}
	}
	var probe scheduler.NodeRecord
	for _, n := range rec.Nodes {
		if n.Name == "probe" {
			probe = n
		}
		if n.State == dag.Blocked && (n.BlockedBy == nil || probe.Receipt == nil && n.BlockedBy == nil) {
			t.Errorf("blocked node %s does not link the HALT receipt", n.Name)
		}
	}
	for _, n := range rec.Nodes {
		if n.State == dag.Blocked && n.BlockedBy.Cid != probe.Receipt.Cid {
			t.Errorf("node %s blocked by %s, want the probe's HALT receipt %s", n.Name, n.BlockedBy, probe.Receipt)
		}
	}
	if !strings.Contains(rec.Reason, "probe (failed)") {
		t.Errorf("reason %q does not name the failed node", rec.Reason)
	}
}

func TestInvalidWorkOrdersRunNothing(t *testing.T) {
	for file, want := range map[string]string{
		"cyclic.json":      "cycle alpha -> gamma -> beta -> alpha",
		"bad-pointer.json": "not declared by the output contract",
	} {
		_, err := scheduler.Load(workorders + file)
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, dag.ErrInvalid) {
			t.Errorf("%s: %v, want %q", file, err, want)
		}
	}
}

// Resume finishes a run from the store alone, without rerunning done nodes.
func TestResumeSkipsDoneNodes(t *testing.T) {
	st := memstore.New()
	ctx := context.Background()
	plan, err := scheduler.Load(workorders + "pipeline.json")
	if err != nil {
		t.Fatal(err)
	}
	s := scheduler.New(scheduler.Options{Store: scheduler.Shared{Store: st}, Key: key, NoCache: true})
	id, err := s.Start(ctx, plan, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Execute(ctx, plan, id); err != nil {
		t.Fatal(err)
	}
	// Resume the finished run from the store alone: nothing runs again.
	plan2, _, cleanup, err := scheduler.PlanFromStore(ctx, st, id)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	s2 := scheduler.New(scheduler.Options{Store: scheduler.Shared{Store: st}, Key: key, NoCache: true})
	rec, err := s2.Execute(ctx, plan2, id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != scheduler.StatusDone || s2.Ran() != 0 {
		t.Fatalf("resume: %s, ran %d", rec.Status, s2.Ran())
	}
	for _, n := range rec.Nodes {
		if n.Attempts != 1 {
			t.Errorf("node %s attempted %d times", n.Name, n.Attempts)
		}
	}
}

// An engine's word is never taken: receipts signed by a key the scheduler
// does not trust are rejected, and the node fails.
func TestUntrustedEngineRejected(t *testing.T) {
	st := memstore.New()
	plan, err := scheduler.Load(workorders + "pipeline.json")
	if err != nil {
		t.Fatal(err)
	}
	rogue := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize))
	engine := &scheduler.Local{Key: rogue, Package: func(inv scheduler.Invocation) (*haygent.Package, error) {
		return plan.Packages[inv.Node], nil
	}}
	_, rec := run(t, st, "pipeline.json", scheduler.Options{Engine: engine})
	if rec.Status != scheduler.StatusHalted {
		t.Fatalf("status %s, want halted", rec.Status)
	}
	for _, n := range rec.Nodes {
		if n.Name == "seed" && (n.State != dag.Failed || !strings.Contains(n.Reason, "trusted signer")) {
			t.Errorf("seed: %s %q, want failed for an untrusted signer", n.State, n.Reason)
		}
		if n.Name != "seed" && n.State != dag.Blocked {
			t.Errorf("%s: %s, want blocked", n.Name, n.State)
		}
	}
}

// tamperingEngine runs every invocation on an input of its own choosing.
type tamperingEngine struct{ scheduler.Local }

func (t *tamperingEngine) Invoke(ctx context.Context, inv scheduler.Invocation) (scheduler.Outcome, error) {
	inv.Input = map[string]any{"value": "not what was asked", "trail": []any{"x"}}
	return t.Local.Invoke(ctx, inv)
}

// pipelineTampering loads the pipeline Work Order and returns its plan
// and a tampering engine for it.
func pipelineTampering(t *testing.T) (*scheduler.Plan, *tamperingEngine) {
	t.Helper()
	plan, err := scheduler.Load(workorders + "pipeline.json")
	if err != nil {
		t.Fatal(err)
	}
	return plan, &tamperingEngine{scheduler.Local{Key: key, Package: func(inv scheduler.Invocation) (*haygent.Package, error) {
		return plan.Packages[inv.Node], nil
	}}}
}

// A trusted engine that does other work than the node asked for (here, on
// another input) gets no acceptance: the receipt is valid, but not for
// this node.
func TestEngineDoingOtherWorkRejected(t *testing.T) {
	st := memstore.New()
	_, engine := pipelineTampering(t)
	_, rec := run(t, st, "pipeline.json", scheduler.Options{Engine: engine})
	for _, n := range rec.Nodes {
		if n.Name == "seed" && (n.State != dag.Failed || !strings.Contains(n.Reason, "same work")) {
			t.Errorf("seed: %s %q, want failed on the same-work check", n.State, n.Reason)
		}
	}
}

// A run record larger than a page is stored as pages and read back whole;
// resuming the finished run runs nothing.
func TestLargeRecordPages(t *testing.T) {
	if testing.Short() {
		t.Skip("1,200 nodes")
	}
	st := memstore.New()
	ctx := context.Background()
	plan, err := scheduler.Load(writeWorkOrder(t, 1200, "fanout"))
	if err != nil {
		t.Fatal(err)
	}
	s := scheduler.New(scheduler.Options{Store: scheduler.Shared{Store: st}, Key: key, Jobs: 2})
	id, err := s.Start(ctx, plan, "")
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := s.Execute(ctx, plan, id); err != nil || rec.Status != scheduler.StatusDone {
		t.Fatalf("execute: %v %v", rec, err)
	}
	rec, _, err := scheduler.LoadRecord(ctx, st, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Nodes) != 1200 {
		t.Fatalf("%d nodes read back, want 1200", len(rec.Nodes))
	}
	for _, n := range rec.Nodes {
		if n.State != dag.Done || n.Acceptance == nil {
			t.Fatalf("node %s read back as %s", n.Name, n.State)
		}
	}
	s2 := scheduler.New(scheduler.Options{Store: scheduler.Shared{Store: st}, Key: key})
	if rec, err := s2.Execute(ctx, plan, id); err != nil || rec.Status != scheduler.StatusDone || s2.Ran() != 0 {
		t.Fatalf("resume: %v, ran %d", err, s2.Ran())
	}
}

// Resuming with Retry runs failed nodes again, and the nodes they
// blocked, keeping the failed attempt's receipt in Earlier; done nodes
// never run again.
func TestRetryFailedNodes(t *testing.T) {
	st := memstore.New()
	plan, engine := pipelineTampering(t)
	_, rec := run(t, st, "pipeline.json", scheduler.Options{Engine: engine})
	if rec.Status != scheduler.StatusHalted {
		t.Fatalf("first run: %s, want halted", rec.Status)
	}
	failed := map[string]cid.Cid{}
	for _, n := range rec.Nodes {
		if n.State == dag.Failed && n.Receipt != nil {
			failed[n.Name] = n.Receipt.Cid
		}
	}
	if len(failed) == 0 {
		t.Fatal("no failed node with a receipt to retry")
	}

	// Without Retry, resuming keeps the failures.
	ctx := context.Background()
	s := scheduler.New(scheduler.Options{Store: scheduler.Shared{Store: st}, Key: key})
	again, err := s.Execute(ctx, plan, rec.Run)
	if err != nil || again.Status != scheduler.StatusHalted || s.Ran() != 0 {
		t.Fatalf("plain resume: %v %v, ran %d", again.Status, err, s.Ran())
	}

	s = scheduler.New(scheduler.Options{Store: scheduler.Shared{Store: st}, Key: key, Retry: true})
	retried, err := s.Execute(ctx, plan, rec.Run)
	if err != nil || retried.Status != scheduler.StatusDone {
		t.Fatalf("retry: %v %v", retried.Status, err)
	}
	for _, n := range retried.Nodes {
		if n.State != dag.Done {
			t.Errorf("node %s is %s after the retry", n.Name, n.State)
		}
		if earlier, ok := failed[n.Name]; ok {
			if len(n.Earlier) != 1 || n.Earlier[0].Cid != earlier || n.Attempts != 2 {
				t.Errorf("node %s: earlier %v, attempts %d; want the failed receipt %s and 2 attempts", n.Name, n.Earlier, n.Attempts, earlier)
			}
		}
	}
	// The record with its earlier attempts is stored and verifies.
	c, err := st.GetRef(ctx, scheduler.RefNamespace, rec.Run)
	if err != nil {
		t.Fatal(err)
	}
	if v := verifyRun(t, st, c, runTrusted); !v.OK() {
		t.Fatal("the retried run does not verify")
	}
}

// recordChecker checks, each time a run's record is stored, that every
// node it names done has its receipt and acceptance stored already: a
// crash right after any commit must leave a run that resumes.
type recordChecker struct {
	cas.Store
	t       *testing.T
	records int
}

// Put stores blocks in Puts of at most 7: a commit's blocks go in several
// small transactions, as a big one's do in a bulk put.
func (c *recordChecker) Put(ctx context.Context, blocks ...cas.Block) error {
	for len(blocks) > 0 {
		n := min(7, len(blocks))
		if err := c.Store.Put(ctx, blocks[:n]...); err != nil {
			return err
		}
		blocks = blocks[n:]
	}
	return nil
}

func (c *recordChecker) SetRefs(ctx context.Context, refs ...cas.Ref) error {
	if err := c.Store.SetRefs(ctx, refs...); err != nil {
		return err
	}
	for _, r := range refs {
		if r.NS != scheduler.RefNamespace {
			continue
		}
		rec, err := scheduler.LoadRecordAt(ctx, c.Store, r.CID)
		if err != nil {
			c.t.Errorf("stored record %s: %v", r.CID, err)
			continue
		}
		c.records++
		for _, n := range rec.Nodes {
			if n.State != dag.Done {
				continue
			}
			for _, l := range []*cas.Link{n.Receipt, n.Acceptance} {
				if l == nil {
					c.t.Errorf("record %s: done node %s lacks a receipt or acceptance", r.CID, n.Name)
					continue
				}
				if ok, err := c.Store.Has(ctx, l.Cid); err != nil || !ok {
					c.t.Errorf("record %s names node %s done, but %s is not stored yet", r.CID, n.Name, l.Cid)
				}
			}
		}
	}
	return nil
}

// slowOpener takes 20 ms to open its store for writing.
type slowOpener struct{ scheduler.Opener }

func (o slowOpener) Open(ctx context.Context, readOnly bool) (cas.Store, error) {
	if !readOnly {
		time.Sleep(20 * time.Millisecond)
	}
	return o.Opener.Open(ctx, readOnly)
}

func TestEveryStoredRecordIsBackedByItsBlocks(t *testing.T) {
	n := 1500
	if testing.Short() {
		n = 300
	}
	plan, err := scheduler.Load(writeWorkOrder(t, n, "fanout"))
	if err != nil {
		t.Fatal(err)
	}
	// Small commit transactions (recordChecker.Put): a record stored
	// after several of them must still find every block it names.
	st := &recordChecker{Store: memstore.New(), t: t}
	// Opening the store for writing is slow, as a big bbolt file's can
	// be, so that nodes finish while a commit gets under way.
	_, rec := execute(t, plan, scheduler.Options{Store: slowOpener{scheduler.Shared{Store: st}}, Jobs: 2, NoCache: true})
	if rec.Status != scheduler.StatusDone {
		t.Fatalf("status %s", rec.Status)
	}
	t.Logf("%d records stored and checked", st.records)
	if st.records < 2 {
		t.Fatalf("only %d records stored: the run committed nothing before its end", st.records)
	}
}

// failingStore refuses every Put once armed, as a full disk would.
type failingStore struct {
	cas.Store
	armed *atomic.Bool
}

func (f failingStore) Put(ctx context.Context, blocks ...cas.Block) error {
	if f.armed.Load() {
		return errors.New("disk full")
	}
	return f.Store.Put(ctx, blocks...)
}

type failingOpener struct {
	st    cas.Store
	armed *atomic.Bool
}

func (o failingOpener) Open(ctx context.Context, readOnly bool) (cas.Store, error) {
	return scheduler.Shared{Store: failingStore{o.st, o.armed}}.Open(ctx, readOnly)
}

// A commit that fails stops the run with its error: the workers stop
// taking nodes and Execute returns, with nothing hanging.
func TestCommitFailureStopsTheRun(t *testing.T) {
	plan, err := scheduler.Load(writeWorkOrder(t, 3000, "fanout"))
	if err != nil {
		t.Fatal(err)
	}
	armed := new(atomic.Bool)
	st := memstore.New()
	s := scheduler.New(scheduler.Options{Store: failingOpener{st, armed}, Key: key, Jobs: 2, NoCache: true, Events: func(ev scheduler.Event) {
		if ev.State == dag.Done {
			armed.Store(true) // the first commit after a node is done fails
		}
	}})
	ctx := context.Background()
	id, err := s.Start(ctx, plan, "")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Execute(ctx, plan, id)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Fatalf("Execute = %v, want the commit's error", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Execute did not return after a failed commit")
	}
	if n := s.Ran(); n >= 3000 {
		t.Fatalf("%d nodes ran after the commit failed: the workers did not stop", n)
	}
}

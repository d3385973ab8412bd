package scheduler_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
)

// at is an Options.Now that tells the time t.
func at(t time.Time) func() time.Time { return func() time.Time { return t } }

// TestListRuns: every run is listed newest first with its Work Order,
// status and nodes done of total; a run whose record cannot be read is
// listed all the same, last, with why.
func TestListRuns(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	day := time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)
	_, old := run(t, st, "halting-branch.json", scheduler.Options{Jobs: 2, Now: at(day)})
	_, mid := run(t, st, "pipeline.json", scheduler.Options{Jobs: 2, Now: at(day.Add(24 * time.Hour))})
	_, newest := run(t, st, "pipeline.json", scheduler.Options{Jobs: 2, Now: at(day.Add(48 * time.Hour))})
	// A ref to a block that is no run record: a damaged store.
	junk, err := cas.Marshal(map[string]any{"type": "hg/packet@1"})
	if err != nil {
		t.Fatal(err)
	}
	b := cas.NewBlock(cas.DagCBOR, junk)
	if err := st.Put(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := st.SetRef(ctx, scheduler.RefNamespace, "run-damaged", b.CID()); err != nil {
		t.Fatal(err)
	}
	list, err := scheduler.ListRuns(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range list {
		ids = append(ids, r.Run)
	}
	want := []string{newest.Run, mid.Run, old.Run, "run-damaged"}
	if len(ids) != len(want) {
		t.Fatalf("listed %v, want %v", ids, want)
	}
	for i := range want {
		if ids[i] != want[i] {
			t.Fatalf("listed %v, want %v (newest first, the unreadable last)", ids, want)
		}
	}
	if r := list[0]; r.Err != nil || r.WorkOrder != "pipeline" || r.Status != scheduler.StatusDone || r.Nodes != 6 || r.Done() != 6 {
		t.Errorf("newest: %+v", r)
	}
	if r := list[2]; r.WorkOrder != "halting-branch" || r.Status != scheduler.StatusHalted || r.Nodes != 5 || r.Done() != 2 ||
		r.States[dag.Failed] != 1 || r.States[dag.Blocked] != 2 {
		t.Errorf("halted run: %+v", r)
	}
	if !list[2].StartedAt().Equal(day) {
		t.Errorf("started %v, want %v", list[2].StartedAt(), day)
	}
	if r := list[3]; r.Err == nil || r.Record != b.CID() {
		t.Errorf("unreadable run: %+v", r)
	}
}

// reaches reports whether every block of the closure of root is in st.
func reaches(t *testing.T, st cas.Store, root cid.Cid) bool {
	t.Helper()
	err := cas.Walk(context.Background(), st, []cid.Cid{root}, nil, func(cid.Cid, []byte) error { return nil })
	return err == nil
}

func has(t *testing.T, st cas.Store, c cid.Cid) bool {
	t.Helper()
	ok, err := st.Has(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestRemoveRunThenGC: a removed run's blocks are freed by gc, except
// those a kept run shares with it (a memo hit names the same receipt and
// acceptance) and those the memo cache still holds; once the memo entries
// go too, so does the rest. The kept run still verifies in full.
func TestRemoveRunThenGC(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	trusted := []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
	_, first := run(t, st, "pipeline.json", scheduler.Options{Jobs: 2})
	_, halted := run(t, st, "halting-branch.json", scheduler.Options{Jobs: 2})
	_, kept := run(t, st, "pipeline.json", scheduler.Options{Jobs: 2}) // every node a memo hit
	firstRoot, err := st.GetRef(ctx, scheduler.RefNamespace, first.Run)
	if err != nil {
		t.Fatal(err)
	}
	haltedRoot, err := st.GetRef(ctx, scheduler.RefNamespace, halted.Run)
	if err != nil {
		t.Fatal(err)
	}
	byName := func(rec *scheduler.Record, name string) scheduler.NodeRecord {
		for _, n := range rec.Nodes {
			if n.Name == name {
				return n
			}
		}
		t.Fatalf("no node %s", name)
		return scheduler.NodeRecord{}
	}
	probe := byName(halted, "probe").Receipt.Cid       // a HALT: never in the memo cache
	steady := byName(halted, "steady").Receipt.Cid     // a PASS of this run alone, in the memo cache
	shared := byName(first, "summary").Receipt.Cid     // the kept run names it too
	if byName(kept, "summary").Receipt.Cid != shared { // the premise
		t.Fatal("the second pipeline run did not reuse the first one's receipt")
	}

	dry, err := scheduler.RemoveRun(ctx, st, halted.Run, scheduler.RemoveOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetRef(ctx, scheduler.RefNamespace, halted.Run); err != nil {
		t.Fatalf("a dry run removed the run: %v", err)
	}
	rm, err := scheduler.RemoveRun(ctx, st, halted.Run, scheduler.RemoveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rm.Receipts != 3 || rm.MemoHeld != 2 { // probe, steady, steady-next; the two PASSes are memo entries
		t.Errorf("removed %d receipts, %d held by the memo cache; want 3 and 2", rm.Receipts, rm.MemoHeld)
	}
	if dry.Receipts != rm.Receipts || dry.MemoHeld != rm.MemoHeld || dry.Record != rm.Record {
		t.Errorf("the dry run said %+v, the removal %+v", dry, rm)
	}
	if _, err := scheduler.RemoveRun(ctx, st, first.Run, scheduler.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := scheduler.LoadRecord(ctx, st, halted.Run); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("a removed run loads: %v", err)
	}
	if _, err := cas.GC(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	switch {
	case has(t, st, haltedRoot) || has(t, st, firstRoot):
		t.Error("gc kept a removed run's record")
	case has(t, st, probe):
		t.Error("gc kept the HALT receipt of a removed run")
	case !has(t, st, steady):
		t.Error("gc removed a receipt a memo entry names")
	case !has(t, st, shared):
		t.Error("gc removed a receipt the kept run names")
	}

	// The memo cache pruned: what only it held goes.
	memo, err := scheduler.MemoEntries(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, m := range memo {
		if m.Err != nil || !m.Receipt.Defined() || m.AcceptedAt().IsZero() {
			t.Errorf("memo entry %+v", m)
		}
		keys = append(keys, m.Key)
	}
	if err := scheduler.RemoveMemo(ctx, st, keys...); err != nil {
		t.Fatal(err)
	}
	stats, err := cas.GC(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Removed == 0 || has(t, st, steady) {
		t.Errorf("gc after the memo entries went removed %d blocks; the removed run's PASS is still there: %v", stats.Removed, has(t, st, steady))
	}
	keptRoot, err := st.GetRef(ctx, scheduler.RefNamespace, kept.Run)
	if err != nil {
		t.Fatal(err)
	}
	if !reaches(t, st, keptRoot) || !has(t, st, shared) {
		t.Fatal("gc removed a block of the kept run")
	}
	v, err := scheduler.VerifyRun(ctx, st, keptRoot, trusted, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !v.OK() {
		node, c := v.FirstFailure()
		t.Fatalf("the kept run no longer verifies: %s %+v", node, c)
	}
	if list, _ := scheduler.ListRuns(ctx, st); len(list) != 1 || list[0].Run != kept.Run {
		t.Errorf("runs left: %+v", list)
	}
}

// TestRemoveRunRefusesRunning: a run recorded running is refused unless
// forced; a pending cancel request goes with the run, so that it keeps no
// record alive.
func TestRemoveRunRefusesRunning(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	plan, err := scheduler.Load(workorders + "pipeline.json")
	if err != nil {
		t.Fatal(err)
	}
	s := scheduler.New(scheduler.Options{Store: scheduler.Shared{Store: st}, Key: key})
	id, err := s.Start(ctx, plan, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := scheduler.Cancel(ctx, st, id, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Cancel settles a run no process executes: recorded running again,
	// as a process that died mid-run leaves it.
	rec, _, err := scheduler.LoadRecord(ctx, st, id)
	if err != nil {
		t.Fatal(err)
	}
	rec.Status = scheduler.StatusRunning
	blocks, root, err := scheduler.EncodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, blocks...); err != nil {
		t.Fatal(err)
	}
	if err := st.SetRef(ctx, scheduler.RefNamespace, id, root); err != nil {
		t.Fatal(err)
	}
	if _, err := scheduler.RemoveRun(ctx, st, id, scheduler.RemoveOptions{}); !errors.Is(err, scheduler.ErrActive) {
		t.Fatalf("removing a running run: %v, want ErrActive", err)
	}
	if _, err := st.GetRef(ctx, scheduler.RefNamespace, id); err != nil {
		t.Fatalf("a refused removal removed the run: %v", err)
	}
	rm, err := scheduler.RemoveRun(ctx, st, id, scheduler.RemoveOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rm.CancelRequest {
		t.Error("the cancel request was not removed with the run")
	}
	for _, ns := range []string{scheduler.RefNamespace, scheduler.CancelNamespace} {
		if _, err := st.GetRef(ctx, ns, id); !errors.Is(err, cas.ErrNotFound) {
			t.Errorf("ref %s/%s left: %v", ns, id, err)
		}
	}
	if _, err := scheduler.RemoveRun(ctx, st, id, scheduler.RemoveOptions{Force: true}); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("removing a removed run: %v, want not found", err)
	}
}

package scheduler_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent/verify"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
)

var (
	otherKey     = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize))
	otherTrusted = []ed25519.PublicKey{otherKey.Public().(ed25519.PublicKey)}
	person       = scheduler.Actor{Who: "alice", Key: "ed25519:alice"}
)

const when = "2030-01-01T00:00:00Z"

// nodeCheck returns the named check of node name in v.
func nodeCheck(v *scheduler.RunVerification, name, check string) *verify.Check {
	for _, n := range v.Nodes {
		if n.Node != name {
			continue
		}
		for i := range n.Checks {
			if n.Checks[i].Name == check {
				return &n.Checks[i]
			}
		}
	}
	return nil
}

// A done run re-measured under today's trust, which no longer trusts its
// signer: the node at the top regresses (failed, with the check that no
// longer holds), everything below it is blocked, the run is halted, and
// no receipt changes. Offline verification then reports the node failed,
// never done, and a record that puts it back to done without its event
// fails. A retry runs it again, never from the memo entry of the work
// that regressed.
func TestRecheckRegressesUnderTodaysTrust(t *testing.T) {
	st := memstore.New()
	ctx := context.Background()
	plan, err := scheduler.Load(workorders + "pipeline.json")
	if err != nil {
		t.Fatal(err)
	}
	_, rec := execute(t, plan, scheduler.Options{Store: scheduler.Shared{Store: st}})
	if rec.Status != scheduler.StatusDone {
		t.Fatalf("run: %s", rec.Status)
	}
	before := map[string]cid.Cid{}
	for _, n := range rec.Nodes {
		before[n.Name] = n.Receipt.Cid
	}
	at := recordCID(t, st, rec.Run)

	// Under the trust it ran with, everything holds and nothing is written.
	_, _, found, err := scheduler.Remeasure(ctx, st, at, runTrusted, "")
	if err != nil || len(found) != 0 {
		t.Fatalf("remeasure under the run's trust: %v, %v", found, err)
	}
	res, err := scheduler.Regress(ctx, st, at, found, person, when)
	if err != nil || res.Root != at || len(res.Record.Events) != 0 {
		t.Fatalf("regress of nothing: %v, root %s (was %s)", err, res.Root, at)
	}

	// Today the run's key is not trusted.
	_, _, found, err = scheduler.Remeasure(ctx, st, at, otherTrusted, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].Node != "seed" || found[0].Check != verify.CheckTrust || found[0].Receipt != before["seed"] {
		t.Fatalf("findings %+v, want seed's trusted signer only (the rest lies below it)", found)
	}
	res, err = scheduler.Regress(ctx, st, at, found, person, when)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.Regressed, " ") != "seed" || strings.Join(res.Blocked, " ") != "left merge middle right summary" {
		t.Errorf("regressed %v, blocked %v", res.Regressed, res.Blocked)
	}
	if res.MemoDropped == 0 {
		t.Error("no memo entry of the regressed work was dropped")
	}
	got, _, err := scheduler.LoadRecord(ctx, st, rec.Run)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != scheduler.StatusHalted || !strings.Contains(got.Reason, "seed (failed)") {
		t.Errorf("run %s: %s", got.Status, got.Reason)
	}
	for _, n := range got.Nodes {
		if n.Receipt == nil || n.Receipt.Cid != before[n.Name] {
			t.Errorf("node %s: receipt %v, was %s: a regression never changes a receipt", n.Name, n.Receipt, before[n.Name])
		}
		switch {
		case n.Name == "seed":
			if n.State != dag.Failed || !strings.HasPrefix(n.Reason, "regressed: trusted signer: ") {
				t.Errorf("seed %s: %q", n.State, n.Reason)
			}
		case n.State != dag.Blocked || n.BlockedBy == nil || n.BlockedBy.Cid != before["seed"] || n.Reason != "upstream seed regressed":
			t.Errorf("node %s %s (%q), want blocked by seed's receipt", n.Name, n.State, n.Reason)
		}
	}
	if len(got.Events) != 1 {
		t.Fatalf("events %+v, want one", got.Events)
	}
	if ev := got.Events[0]; ev.Kind != scheduler.EventRegressed || ev.Node != "seed" || ev.From != dag.Done || ev.To != dag.Failed ||
		ev.Receipt == nil || ev.Receipt.Cid != before["seed"] || ev.Check != verify.CheckTrust || ev.Who != "alice" || ev.At != when {
		t.Errorf("event %+v", ev)
	}
	memo, err := st.Refs(ctx, scheduler.MemoNamespace)
	if err != nil {
		t.Fatal(err)
	}
	seedAcc := node(t, got, "seed").Acceptance.Cid
	for _, r := range memo {
		if r.CID == seedAcc {
			t.Errorf("memo entry %s still names the regressed acceptance", r.Name)
		}
	}
	// The measured record is no longer the run's: it cannot be regressed
	// again from it.
	if _, err := scheduler.Regress(ctx, st, at, found, person, when); !errors.Is(err, scheduler.ErrRecordMoved) {
		t.Errorf("regress from a stale record: %v", err)
	}

	// Offline, under the run's own trust: every check holds, and seed is
	// failed, not done.
	now := recordCID(t, st, rec.Run)
	v := verifyRun(t, st, now, runTrusted)
	if !v.OK() {
		t.Fatal("the regressed run does not verify")
	}
	if c := nodeCheck(v, "seed", scheduler.CheckEvents); c == nil || !c.OK || !strings.Contains(c.Detail, "regressed") {
		t.Errorf("seed's events check: %+v", c)
	}
	for _, n := range v.Nodes {
		if n.State == dag.Done {
			t.Errorf("verification reports node %s done", n.Node)
		}
	}
	// A record that says seed is done again, keeping the event, fails.
	forged, _, _ := scheduler.LoadRecord(ctx, st, rec.Run)
	for i := range forged.Nodes {
		forged.Nodes[i].State, forged.Nodes[i].Reason, forged.Nodes[i].BlockedBy = dag.Done, "", nil
	}
	forged.Status = scheduler.StatusDone
	fv := verifyRun(t, st, storeRecord(t, st, forged), runTrusted)
	if name, c := fv.FirstFailure(); name != "seed" || c == nil || c.Name != scheduler.CheckEvents || !strings.Contains(c.Detail, "which regressed at "+when) {
		t.Errorf("forged record: first failure %s %+v", name, c)
	}

	// A retry runs seed again (its regressed work is not reused) and
	// the rest from the memo cache: done, and it verifies.
	s := scheduler.New(scheduler.Options{Store: scheduler.Shared{Store: st}, Key: key, Retry: true})
	again, err := s.Execute(ctx, plan, rec.Run)
	if err != nil || again.Status != scheduler.StatusDone {
		t.Fatalf("retry: %v %v", again.Status, err)
	}
	seed := node(t, again, "seed")
	if seed.Receipt.Cid == before["seed"] || len(seed.Earlier) != 1 || seed.Earlier[0].Cid != before["seed"] || seed.Attempts != 2 {
		t.Errorf("seed after the retry: receipt %s, earlier %v, attempts %d", seed.Receipt, seed.Earlier, seed.Attempts)
	}
	if m := node(t, again, "middle"); len(m.Earlier) != 0 || m.Receipt.Cid != before["middle"] {
		t.Errorf("middle after the retry: receipt %s (was %s), earlier %v", m.Receipt, before["middle"], m.Earlier)
	}
	if v := verifyRun(t, st, recordCID(t, st, rec.Run), runTrusted); !v.OK() {
		t.Error("the retried run does not verify")
	}
}

// A person withdraws a node (deleted) and names a later accepted receipt
// that supersedes another's work (rewritten): each is recorded as an
// event with who and why, blocks what depends on the node, halts the run,
// and stays so on a retry. Verification checks the states against the
// events, and the later receipt.
func TestWithdrawAndSupersede(t *testing.T) {
	st := memstore.New()
	ctx := context.Background()
	plan, err := scheduler.Load(workorders + "pipeline.json")
	if err != nil {
		t.Fatal(err)
	}
	_, rec := execute(t, plan, scheduler.Options{Store: scheduler.Shared{Store: st}})
	_, later := execute(t, plan, scheduler.Options{Store: scheduler.Shared{Store: st}, NoCache: true})

	got, blocked, err := scheduler.Withdraw(ctx, st, rec.Run, "middle", person, "not wanted any more", when)
	if err != nil {
		t.Fatal(err)
	}
	if m := node(t, got, "middle"); m.State != dag.Deleted || m.Reason != "withdrawn by alice: not wanted any more" || m.Receipt == nil {
		t.Errorf("middle %s %q receipt %v", m.State, m.Reason, m.Receipt)
	}
	if strings.Join(blocked, " ") != "merge summary" || got.Status != scheduler.StatusHalted {
		t.Errorf("blocked %v, run %s", blocked, got.Status)
	}
	if _, _, err := scheduler.Withdraw(ctx, st, rec.Run, "middle", person, "again", when); !errors.Is(err, scheduler.ErrNotAllowed) {
		t.Errorf("withdrawing a deleted node: %v", err)
	}

	if _, _, err := scheduler.Supersede(ctx, st, rec.Run, "right", rec.Run, "right", runTrusted, person, "why", when); err == nil {
		t.Error("a node superseded by itself")
	}
	if _, _, err := scheduler.Supersede(ctx, st, rec.Run, "right", later.Run, "right", otherTrusted, person, "why", when); err == nil {
		t.Error("superseded by a receipt today's trust refuses")
	}
	got, _, err = scheduler.Supersede(ctx, st, rec.Run, "right", later.Run, "right", runTrusted, person, "redone elsewhere", when)
	if err != nil {
		t.Fatal(err)
	}
	r := node(t, got, "right")
	if r.State != dag.Rewritten || !strings.Contains(r.Reason, later.Run+"/right") {
		t.Errorf("right %s %q", r.State, r.Reason)
	}
	ev := got.Events[len(got.Events)-1]
	if ev.Kind != scheduler.EventRewritten || ev.By == nil || ev.By.Cid != node(t, later, "right").Receipt.Cid || ev.ByNode != later.Run+"/right" || ev.Reason != "redone elsewhere" {
		t.Errorf("rewritten event %+v", ev)
	}
	if _, _, err := scheduler.Supersede(ctx, st, rec.Run, "merge", rec.Run, "middle", runTrusted, person, "why", when); err == nil {
		t.Error("superseded by a deleted node")
	}

	v := verifyRun(t, st, recordCID(t, st, rec.Run), runTrusted)
	if !v.OK() {
		t.Fatal("the run with a deleted and a rewritten node does not verify")
	}
	if c := nodeCheck(v, "right", scheduler.CheckEvents); c == nil || !c.OK {
		t.Errorf("right's events check %+v", c)
	}

	// Deleted and rewritten are final: a retry runs none of it.
	s := scheduler.New(scheduler.Options{Store: scheduler.Shared{Store: st}, Key: key, Retry: true})
	again, err := s.Execute(ctx, plan, rec.Run)
	if err != nil {
		t.Fatal(err)
	}
	if s.Ran() != 0 || again.Status != scheduler.StatusHalted {
		t.Errorf("retry ran %d, run %s", s.Ran(), again.Status)
	}
	want := map[string]string{"seed": dag.Done, "left": dag.Done, "middle": dag.Deleted, "right": dag.Rewritten, "merge": dag.Blocked, "summary": dag.Blocked}
	for name, state := range states(again) {
		if want[name] != state {
			t.Errorf("after the retry %s is %s, want %s", name, state, want[name])
		}
	}

	// A record that makes a node deleted with no event for it, or
	// undoes a deletion, fails verification.
	for _, tc := range []struct {
		node, state, want string
	}{
		{"left", dag.Deleted, "the node is deleted, but no event made it so"},
		{"middle", dag.Done, "made it deleted"},
	} {
		forged, _, _ := scheduler.LoadRecord(ctx, st, rec.Run)
		for i := range forged.Nodes {
			if forged.Nodes[i].Name == tc.node {
				forged.Nodes[i].State = tc.state
			}
		}
		fv := verifyRun(t, st, storeRecord(t, st, forged), runTrusted)
		if name, c := fv.FirstFailure(); c == nil || name != tc.node || c.Name != scheduler.CheckEvents || !strings.Contains(c.Detail, tc.want) {
			t.Errorf("%s made %s: first failure %s %+v", tc.node, tc.state, name, c)
		}
	}
}

// Events are stored in a chain of blocks apart from the record's root: a
// record that gains events in several writes reads them back in order,
// and one of many events (a recheck of a large run) stays within the
// block limit.
func TestRunEventsChain(t *testing.T) {
	st := memstore.New()
	ctx := context.Background()
	plan := echoPlan(t, `{"a": {"haygent": "ECHO", "input": {"value": "v"}}}`, "")
	_, rec := execute(t, plan, scheduler.Options{Store: scheduler.Shared{Store: st}})
	long := strings.Repeat("é", 5000)
	for i := range 3 {
		loaded, _, err := scheduler.LoadRecord(ctx, st, rec.Run)
		if err != nil {
			t.Fatal(err)
		}
		for j := range 1000 {
			loaded.Events = append(loaded.Events, scheduler.RunEvent{Kind: scheduler.EventBreakerReset, Node: "a", From: dag.Done, To: dag.Done,
				Reason: long, Who: "w", At: string(rune('a'+i)) + "-" + strings.Repeat("x", j%7)})
		}
		blocks, root, err := scheduler.EncodeRecord(loaded)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			if len(b.Data()) > cas.MaxBlockSize/2 {
				t.Fatalf("a block of %d bytes", len(b.Data()))
			}
		}
		if err := st.Put(ctx, blocks...); err != nil {
			t.Fatal(err)
		}
		if err := st.SetRef(ctx, scheduler.RefNamespace, rec.Run, root); err != nil {
			t.Fatal(err)
		}
	}
	got, _, err := scheduler.LoadRecord(ctx, st, rec.Run)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Events) != 3000 || got.Events[0].At != "a-" || got.Events[2999].At[0] != 'c' {
		t.Fatalf("read back %d events", len(got.Events))
	}
	if r := got.Events[0].Reason; len(r) > 4096 || !strings.HasSuffix(r, " ...") {
		t.Errorf("a reason of %d bytes was kept at %d", len(long), len(r))
	}
}

package metrics_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/cas/storetest"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/internal/tamper"
	"github.com/haygent/hg/metrics"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
)

var (
	key     = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	other   = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{8}, ed25519.SeedSize))
	trusted = []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
)

// clock is the scheduler's clock in a test: start until the run has
// started, then later.
type clock struct {
	started    atomic.Bool
	start, end time.Time
}

func (c *clock) now() time.Time {
	if c.started.Load() {
		return c.end
	}
	return c.start
}

// runOrder runs the Work Order file in st with the slot answers guesses
// (the repair slot "fix" answers them in order), on the clock c, and
// returns its record.
func runOrder(t *testing.T, st cas.Store, file string, guesses []string, c *clock) *scheduler.Record {
	t.Helper()
	plan, err := scheduler.Load("testdata/workorders/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var answers []json.RawMessage
	for _, g := range guesses {
		b, _ := json.Marshal(map[string]string{"guess": g})
		answers = append(answers, b)
	}
	s := scheduler.New(scheduler.Options{Store: scheduler.Shared{Store: st}, Key: key, Now: c.now,
		Adapter: haygent.NewScript(map[string][]json.RawMessage{"fix": answers})})
	ctx := context.Background()
	id, err := s.Start(ctx, plan, "")
	if err != nil {
		t.Fatal(err)
	}
	c.started.Store(true)
	rec, err := s.Execute(ctx, plan, id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// fixture holds the store every test starts from: a run of class
// converge (a PASS after two repairs) and one of class stuck (a PASS at
// the first try, a HALT after its repair budget, a HALT on a denied read).
type fixture struct {
	st              *storetest.Corruptible
	converge, stuck *scheduler.Record
	c1, c2          *clock
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	now := time.Now().UTC()
	f := &fixture{st: storetest.NewCorruptible(memstore.New())}
	f.c1 = &clock{start: now.Add(-3 * time.Hour), end: now.Add(time.Hour)}
	f.converge = runOrder(t, f.st, "converge.json", []string{"red", "blue"}, f.c1)
	if f.converge.Status != scheduler.StatusDone {
		t.Fatalf("converge: %s: %s", f.converge.Status, f.converge.Reason)
	}
	f.c2 = &clock{start: now.Add(-time.Hour), end: now.Add(-2 * time.Hour)} // accepted "before" the receipts: skewed clocks
	f.stuck = runOrder(t, f.st, "stuck.json", []string{"red", "blue"}, f.c2)
	if f.stuck.Status != scheduler.StatusHalted {
		t.Fatalf("stuck: %s: %s", f.stuck.Status, f.stuck.Reason)
	}
	return f
}

func compute(t *testing.T, st cas.Store, opts metrics.Options) *metrics.Report {
	t.Helper()
	r, err := metrics.Compute(context.Background(), st, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func class(t *testing.T, r *metrics.Report, name string) metrics.ClassGroup {
	t.Helper()
	for _, c := range r.Classes {
		if c.Class == name {
			return c
		}
	}
	t.Fatalf("no class %q in %+v", name, r.Classes)
	return metrics.ClassGroup{}
}

func haygentGroup(t *testing.T, r *metrics.Report, name string) metrics.HaygentGroup {
	t.Helper()
	for _, h := range r.Haygents {
		if h.Haygent == name {
			return h
		}
	}
	t.Fatalf("no Haygent %q in %+v", name, r.Haygents)
	return metrics.HaygentGroup{}
}

func receiptOf(t *testing.T, rec *scheduler.Record, node string) cid.Cid {
	t.Helper()
	for _, n := range rec.Nodes {
		if n.Name == node && n.Receipt != nil {
			return n.Receipt.Cid
		}
	}
	t.Fatalf("run %s: node %s has no receipt", rec.Run, node)
	return cid.Undef
}

// Every metric, on runs whose outcome is known: two repairs then PASS
// give repairs per PASS 2; the HALT after two repairs of a budget of two
// is one exhausted budget; the refused read is one denied operation and
// one HALT on a denial; the times come from the recorded clocks.
func TestComputeCountsWhatTheRunsDid(t *testing.T) {
	f := newFixture(t)
	r := compute(t, f.st, metrics.Options{Trusted: trusted})

	if r.Runs.Listed != 2 || r.Runs.Counted != 2 || len(r.Runs.Unreadable) != 0 || len(r.Runs.Unverified) != 0 {
		t.Fatalf("runs %+v", r.Runs)
	}
	conv := class(t, r, "converge")
	if conv.Runs != 1 || conv.Done != 1 || conv.Receipts != 1 || conv.Verified != 1 || conv.Pass != 1 || conv.Halt != 0 {
		t.Errorf("converge: %+v", conv)
	}
	if conv.Repair.RepairsInPass != 2 || conv.Repair.PerPass == nil || *conv.Repair.PerPass != 2 || conv.Repair.AfterRepair != 1 || conv.Repair.FirstTry != 0 {
		t.Errorf("converge repair: %+v (per pass %v), want 2 repairs, 2 per PASS, 1 after repair", conv.Repair, conv.Repair.PerPass)
	}
	// The run started at c1.start; its node was accepted at c1.end.
	if want := f.c1.end.Sub(f.c1.start).Milliseconds(); conv.RunToVerified != (metrics.Durations{Count: 1, MedianMS: want, MaxMS: want}) {
		t.Errorf("converge run to verified %+v, want 1 of %d ms", conv.RunToVerified, want)
	}
	// The receipt started at the runner's (real) clock, before c1.end.
	if tv := conv.ToVerified; tv.Count != 1 || tv.MaxMS <= 0 || tv.MaxMS > time.Hour.Milliseconds() || conv.ClockSkew != 0 {
		t.Errorf("converge to verified %+v, skew %d: want one in (0, 1h]", tv, conv.ClockSkew)
	}

	stuck := class(t, r, "stuck")
	if stuck.Runs != 1 || stuck.Halted != 1 || stuck.Receipts != 3 || stuck.Verified != 3 || stuck.Pass != 1 || stuck.Halt != 2 {
		t.Errorf("stuck: %+v", stuck)
	}
	if stuck.Repair.FirstTry != 1 || stuck.Repair.RepairsInPass != 0 || stuck.Repair.BudgetExhausted != 1 {
		t.Errorf("stuck repair %+v: want 1 at the first try, 1 exhausted budget", stuck.Repair)
	}
	if stuck.Denied != 1 || stuck.DeniedReceipts != 1 || stuck.HaltsOnDenial != 1 {
		t.Errorf("stuck denials: %d operations in %d receipts, %d halts on denial; want 1, 1, 1", stuck.Denied, stuck.DeniedReceipts, stuck.HaltsOnDenial)
	}
	// The budget HALT names gate, evidence and restart point; the
	// denial's names no gate.
	if q := stuck.HaltInfo; q != (metrics.HaltQuality{Halts: 2, Gate: 1, Evidence: 1, RestartPoint: 2, Complete: 1}) {
		t.Errorf("halt quality %+v", q)
	}
	if stuck.RunToVerified.Count != 0 {
		t.Errorf("a halted run has a time to a verified result: %+v", stuck.RunToVerified)
	}
	// Accepted an hour before the receipt started: not a duration.
	if stuck.ToVerified.Count != 0 || stuck.ClockSkew != 1 {
		t.Errorf("stuck to verified %+v, skew %d: want none, 1 skewed", stuck.ToVerified, stuck.ClockSkew)
	}

	guess := haygentGroup(t, r, "guess@1.0.0")
	if guess.Receipts != 3 || guess.Pass != 2 || guess.Halt != 1 || guess.Repair.RepairsInPass != 2 || *guess.Repair.PerPass != 1 {
		t.Errorf("guess: %+v", guess)
	}
	peek := haygentGroup(t, r, "peek@1.0.0")
	if peek.Receipts != 1 || peek.Halt != 1 || peek.Denied != 1 || peek.Pass != 0 || peek.Repair.PerPass != nil {
		t.Errorf("peek: %+v", peek)
	}
	if r.Total.Receipts != 4 || r.Total.Pass != 2 || r.Total.Halt != 2 || r.Total.Unverified != 0 {
		t.Errorf("total %+v", r.Total)
	}
	if len(r.NotMeasured) == 0 {
		t.Errorf("nothing said to be not measured")
	}
}

// Since leaves out the runs started before it, and says how many.
func TestComputeSince(t *testing.T) {
	f := newFixture(t)
	r := compute(t, f.st, metrics.Options{Trusted: trusted, Since: f.c1.start.Add(time.Minute)})
	if r.Runs.Counted != 1 || r.Runs.BeforeSince != 1 || len(r.Classes) != 1 || r.Classes[0].Class != "stuck" || r.Total.Receipts != 3 {
		t.Errorf("since: runs %+v, classes %+v, total %d receipts", r.Runs, r.Classes, r.Total.Receipts)
	}
}

// A memo hit is the same receipt: counted once, per Haygent and class.
func TestComputeCountsAReusedReceiptOnce(t *testing.T) {
	f := newFixture(t)
	again := runOrder(t, f.st, "converge.json", nil, &clock{start: time.Now(), end: time.Now()})
	if again.Status != scheduler.StatusDone || !again.Nodes[0].Memo {
		t.Fatalf("second run: %s, memo %v", again.Status, again.Nodes[0].Memo)
	}
	r := compute(t, f.st, metrics.Options{Trusted: trusted})
	conv := class(t, r, "converge")
	if conv.Runs != 2 || conv.Receipts != 1 || conv.Pass != 1 || conv.RunToVerified.Count != 2 {
		t.Errorf("converge after a memo hit: %+v", conv)
	}
	if r.Total.Receipts != 4 {
		t.Errorf("total %d receipts, want 4", r.Total.Receipts)
	}
}

// Adversarial: a HALT receipt forged into a PASS and signed with the
// trusted key itself, and set in the run record as the node's accepted
// work, does not raise the PASS count: it is one unverified receipt.
func TestComputeForgedPassIsNotAPass(t *testing.T) {
	f := newFixture(t)
	before := compute(t, f.st, metrics.Options{Trusted: trusted})
	ctx := context.Background()
	halt := receiptOf(t, f.stuck, "fix")
	forged, err := tamper.Apply(ctx, f.st, "forge-pass", halt, cid.Undef, key)
	if err != nil {
		t.Fatal(err)
	}
	acc := scheduler.Acceptance{Type: scheduler.TypeAcceptance, Receipt: cas.Link{Cid: forged}, Checks: []scheduler.CheckRec{},
		Verdict: scheduler.Accepted, Status: ledger.StatusPass, Verifier: scheduler.VerifierName, At: time.Now().UTC().Format(time.RFC3339Nano)}
	data, err := cas.Marshal(&acc)
	if err != nil {
		t.Fatal(err)
	}
	ab := cas.NewBlock(cas.DagCBOR, data)
	if err := f.st.Put(ctx, ab); err != nil {
		t.Fatal(err)
	}
	editNode(t, f.st, f.stuck.Run, "fix", func(n map[string]any) {
		n["state"], n["receipt"], n["acceptance"], n["reason"] = "done", forged, ab.CID(), ""
	})
	after := compute(t, f.st, metrics.Options{Trusted: trusted})
	if after.Total.Pass != before.Total.Pass || after.Total.Unverified != 1 || after.Total.Receipts != before.Total.Receipts {
		t.Errorf("forged PASS: pass %d (was %d), unverified %d, receipts %d (was %d)",
			after.Total.Pass, before.Total.Pass, after.Total.Unverified, after.Total.Receipts, before.Total.Receipts)
	}
	if n := after.Total.UnverifiedBy["gates"] + after.Total.UnverifiedBy["status"]; n != 1 {
		t.Errorf("unverified by %v: want the gates or the status named", after.Total.UnverifiedBy)
	}
	if g := haygentGroup(t, after, "guess@1.0.0"); g.Pass != 2 || g.Unverified != 1 {
		t.Errorf("guess after the forgery: %+v", g)
	}
}

// editNode rewrites one node of a stored run record, as someone with the
// store's files could, and moves the run's ref to the new record.
func editNode(t *testing.T, st cas.Store, run, node string, edit func(map[string]any)) {
	t.Helper()
	ctx := context.Background()
	root, err := st.GetRef(ctx, scheduler.RefNamespace, run)
	if err != nil {
		t.Fatal(err)
	}
	rc, n, err := tamper.EditRecord(ctx, st, root, nil, func(m map[string]any) bool {
		if m["name"] != node {
			return false
		}
		edit(m)
		return true
	})
	if err != nil || n == 0 {
		t.Fatalf("run %s has no node %s (%v)", run, node, err)
	}
	if err := st.SetRef(ctx, scheduler.RefNamespace, run, rc); err != nil {
		t.Fatal(err)
	}
}

// A PASS that hg recheck regresses is a false PASS found, and no longer a
// PASS: here the evidence behind the converge run's PASS is damaged, the
// re-measurement finds it (the check "block hashes") and records the
// regression, as hg recheck does.
func TestComputeFalsePassFoundByRecheck(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	rc := receiptOf(t, f.converge, "fix")
	r, err := ledger.LoadReceipt(ctx, f.st, rc)
	if err != nil {
		t.Fatal(err)
	}
	if !f.st.Corrupt(r.Evidence[len(r.Evidence)-1].Cid, []byte("not the evidence")) {
		t.Fatal("nothing to damage")
	}
	regress(t, f.st, f.converge.Run, trusted, nil)
	rep := compute(t, f.st, metrics.Options{Trusted: trusted})
	conv := class(t, rep, "converge")
	if conv.FalsePass != 1 || conv.Pass != 0 || conv.Unverified != 1 || conv.TrustWithdrawn != 0 || conv.ReplayDiverged != 0 {
		t.Errorf("converge after a regression: %+v", conv)
	}
	if conv.UnverifiedBy["block hashes"] != 1 {
		t.Errorf("unverified by %v", conv.UnverifiedBy)
	}
	if rep.Total.FalsePass != 1 || rep.Total.Pass != 1 {
		t.Errorf("total: false PASS %d, PASS %d; want 1, 1", rep.Total.FalsePass, rep.Total.Pass)
	}
	// The regression is a measurement: 1 false PASS of 1 measured.
	if conv.Rechecked != 1 || conv.FalsePassRate == nil || *conv.FalsePassRate != 1 {
		t.Errorf("converge: rechecked %d, rate %v; want 1, 1", conv.Rechecked, conv.FalsePassRate)
	}
}

// The recheck log (hg recheck records every re-measurement) gives the
// rates their denominators: here the converge run's PASS held under a
// replay that agreed, and the stuck run's first-try PASS held without a
// replay, then regressed on a replay that diverged: no false PASS (a
// divergence is not one) in 2 measured, and 1 of 2 replayed agreed.
func TestComputeRecheckLog(t *testing.T) {
	f := newFixture(t)
	before := compute(t, f.st, metrics.Options{Trusted: trusted})
	names := map[string]bool{}
	for _, n := range before.NotMeasured {
		names[n.Metric] = true
	}
	if !names["false_pass_rate"] || !names["replay_agreement"] || before.Total.FalsePassRate != nil || before.Total.ReplayAgreement != nil {
		t.Fatalf("without a recheck: not measured %v, rates %v %v", before.NotMeasured, before.Total.FalsePassRate, before.Total.ReplayAgreement)
	}
	ctx := context.Background()
	log := func(rec *scheduler.Record, e scheduler.RecheckEntry) {
		t.Helper()
		at, err := f.st.GetRef(ctx, scheduler.RefNamespace, rec.Run)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := scheduler.RecordRecheck(ctx, f.st, scheduler.Recheck{Run: rec.Run, Record: cas.Link{Cid: at}, At: time.Now().UTC().Format(time.RFC3339Nano),
			Who: "test", Nodes: []scheduler.RecheckEntry{e}}); err != nil {
			t.Fatal(err)
		}
	}
	conv, easy := receiptOf(t, f.converge, "fix"), receiptOf(t, f.stuck, "easy")
	log(f.converge, scheduler.RecheckEntry{Node: "fix", Receipt: cas.Link{Cid: conv}, Result: scheduler.RecheckHolds,
		Replay: &scheduler.RecheckReplay{Agree: 4, Transitions: 4}})
	log(f.stuck, scheduler.RecheckEntry{Node: "easy", Receipt: cas.Link{Cid: easy}, Result: scheduler.RecheckHolds})
	// Entries that are no measurement of this run's receipts are not
	// counted: a result of no known kind, a receipt of another run.
	log(f.stuck, scheduler.RecheckEntry{Node: "peek", Receipt: cas.Link{Cid: receiptOf(t, f.stuck, "peek")}, Result: "hostile"})
	for _, other := range []struct {
		rec     *scheduler.Record
		receipt cid.Cid
	}{{f.stuck, conv}, {f.converge, receiptOf(t, f.stuck, "fix")}} {
		log(other.rec, scheduler.RecheckEntry{Node: "fix", Receipt: cas.Link{Cid: other.receipt}, Result: scheduler.RecheckHolds,
			Replay: &scheduler.RecheckReplay{Diverged: true}})
	}
	regress(t, f.st, f.stuck.Run, trusted, []scheduler.Finding{{Node: "easy", Receipt: easy, Check: scheduler.CheckReplay, Detail: "diverged"}})
	log(f.stuck, scheduler.RecheckEntry{Node: "easy", Receipt: cas.Link{Cid: easy}, Result: scheduler.RecheckRegressed, Check: scheduler.CheckReplay,
		Replay: &scheduler.RecheckReplay{Agree: 1, Transitions: 4, Diverged: true}})

	r := compute(t, f.st, metrics.Options{Trusted: trusted})
	if len(r.NotMeasured) != 0 {
		t.Errorf("not measured: %v", r.NotMeasured)
	}
	tot := r.Total
	if tot.Rechecked != 2 || tot.FalsePass != 0 || tot.FalsePassRate == nil || *tot.FalsePassRate != 0 {
		t.Errorf("total: rechecked %d, false PASS %d, rate %v; want 2, 0, 0", tot.Rechecked, tot.FalsePass, tot.FalsePassRate)
	}
	if tot.Replayed != 2 || tot.ReplayAgreed != 1 || tot.ReplayAgreement == nil || *tot.ReplayAgreement != 0.5 || tot.ReplayDiverged != 1 {
		t.Errorf("total: replayed %d, agreed %d, agreement %v, diverged %d; want 2, 1, 0.5, 1", tot.Replayed, tot.ReplayAgreed, tot.ReplayAgreement, tot.ReplayDiverged)
	}
	if c := class(t, r, "converge"); c.Replayed != 1 || *c.ReplayAgreement != 1 || c.Rechecked != 1 {
		t.Errorf("converge: %+v", c)
	}
	if p := haygentGroup(t, r, "peek@1.0.0"); p.Rechecked != 0 {
		t.Errorf("peek counted as rechecked by an entry of no known result: %+v", p)
	}
}

// A run's recheck log that is not one (another run's, here) is named and
// not counted; the metrics of everything else stand.
func TestComputeNamesABadRecheckLog(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	at, _ := f.st.GetRef(ctx, scheduler.RefNamespace, f.converge.Run)
	head, err := scheduler.RecordRecheck(ctx, f.st, scheduler.Recheck{Run: f.converge.Run, Record: cas.Link{Cid: at}, At: "2026-12-01T00:00:00Z", Who: "test",
		Nodes: []scheduler.RecheckEntry{{Node: "fix", Receipt: cas.Link{Cid: receiptOf(t, f.converge, "fix")}, Result: scheduler.RecheckHolds}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.SetRef(ctx, scheduler.RecheckNamespace, f.stuck.Run, head); err != nil {
		t.Fatal(err)
	}
	r := compute(t, f.st, metrics.Options{Trusted: trusted})
	if len(r.Runs.Unverified) != 1 || r.Runs.Unverified[0].Run != f.stuck.Run || r.Runs.Unverified[0].Check != metrics.CheckRecheckLog {
		t.Errorf("runs unverified: %+v", r.Runs.Unverified)
	}
	if r.Total.Rechecked != 1 || r.Total.Pass != 2 || r.Total.Receipts != 4 {
		t.Errorf("total %+v", r.Total)
	}
}

// A PASS regressed because its signer is no longer trusted is counted as
// such, not as a false PASS; one whose replay diverged is counted as a
// divergence, and is no PASS, though it still verifies.
func TestComputeTrustWithdrawnAndReplayDiverged(t *testing.T) {
	f := newFixture(t)
	regress(t, f.st, f.converge.Run, []ed25519.PublicKey{other.Public().(ed25519.PublicKey)}, nil)
	rep := compute(t, f.st, metrics.Options{Trusted: []ed25519.PublicKey{other.Public().(ed25519.PublicKey)}})
	if c := class(t, rep, "converge"); c.TrustWithdrawn != 1 || c.FalsePass != 0 || c.Pass != 0 || c.UnverifiedBy["trusted signer"] != 1 {
		t.Errorf("trust withdrawn: %+v", c)
	}

	g := newFixture(t)
	rc := receiptOf(t, g.stuck, "easy")
	regress(t, g.st, g.stuck.Run, trusted, []scheduler.Finding{{Node: "easy", Receipt: rc, Check: scheduler.CheckReplay, Detail: "1/4 transitions agree"}})
	rep = compute(t, g.st, metrics.Options{Trusted: trusted})
	if c := class(t, rep, "stuck"); c.ReplayDiverged != 1 || c.FalsePass != 0 || c.Pass != 0 || c.Verified != 3 {
		t.Errorf("replay diverged: %+v", c)
	}
}

// regress re-measures run under keys and records what it finds, and
// extra findings, as hg recheck does.
func regress(t *testing.T, st cas.Store, run string, keys []ed25519.PublicKey, extra []scheduler.Finding) {
	t.Helper()
	ctx := context.Background()
	at, err := st.GetRef(ctx, scheduler.RefNamespace, run)
	if err != nil {
		t.Fatal(err)
	}
	_, _, found, err := scheduler.Remeasure(ctx, st, at, keys, "")
	if err != nil {
		t.Fatal(err)
	}
	found = append(found, extra...)
	if len(found) == 0 {
		t.Fatal("the re-measurement found nothing")
	}
	if _, err := scheduler.Regress(ctx, st, at, found, scheduler.Actor{Who: "test"}, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		t.Fatal(err)
	}
}

// Adversarial: a regressed event forged into the halted run's record,
// naming the converge run's PASS, passes the run's events check (which
// does not tie an event's receipt to its node) but is not counted: that
// PASS stays a PASS, no false PASS is found, and the run is named.
func TestComputeForgedRegressionOfAnotherRunsReceipt(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	conv := receiptOf(t, f.converge, "fix")
	data, err := cas.EncodeNode(map[string]any{"type": scheduler.TypeRunEvents, "run": f.stuck.Run, "events": []any{map[string]any{
		"kind": scheduler.EventRegressed, "node": "fix", "from": "done", "to": "failed", "receipt": conv,
		"check": "gates", "reason": "forged", "attempts": int64(1), "who": "mallory", "at": "2026-12-01T00:00:00Z"}}})
	if err != nil {
		t.Fatal(err)
	}
	b := cas.NewBlock(cas.DagCBOR, data)
	if err := f.st.Put(ctx, b); err != nil {
		t.Fatal(err)
	}
	editRoot(t, f.st, f.stuck.Run, func(r map[string]any) { r["events"] = b.CID() })
	at, _ := f.st.GetRef(ctx, scheduler.RefNamespace, f.stuck.Run)
	v, err := scheduler.VerifyRun(ctx, f.st, at, trusted, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range v.Checks {
		if !c.OK {
			t.Fatalf("the forged run fails %s (%s): the case this test is about is gone", c.Name, c.Detail)
		}
	}
	r := compute(t, f.st, metrics.Options{Trusted: trusted})
	if r.Total.FalsePass != 0 || r.Total.Pass != 2 || class(t, r, "converge").Pass != 1 {
		t.Errorf("a forged regression counted: false PASS %d, PASS %d", r.Total.FalsePass, r.Total.Pass)
	}
	if len(r.Runs.Unverified) != 1 || r.Runs.Unverified[0].Run != f.stuck.Run || r.Runs.Unverified[0].Check != scheduler.CheckEvents {
		t.Errorf("runs unverified: %+v", r.Runs.Unverified)
	}
}

// editRoot rewrites the root of a stored run record and moves the ref.
func editRoot(t *testing.T, st cas.Store, run string, edit func(map[string]any)) {
	t.Helper()
	ctx := context.Background()
	root, err := st.GetRef(ctx, scheduler.RefNamespace, run)
	if err != nil {
		t.Fatal(err)
	}
	data, err := st.Get(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	n, err := cas.DecodeNode(data)
	if err != nil {
		t.Fatal(err)
	}
	m := n.(map[string]any)
	edit(m)
	if data, err = cas.EncodeNode(m); err != nil {
		t.Fatal(err)
	}
	b := cas.NewBlock(cas.DagCBOR, data)
	if err := st.Put(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := st.SetRef(ctx, scheduler.RefNamespace, run, b.CID()); err != nil {
		t.Fatal(err)
	}
}

// With no trusted key nothing verifies, and nothing is counted but as
// unverified.
func TestComputeTrustsNothingByDefault(t *testing.T) {
	f := newFixture(t)
	r := compute(t, f.st, metrics.Options{})
	if r.Total.Receipts != 4 || r.Total.Unverified != 4 || r.Total.Pass != 0 || r.Total.Halt != 0 || r.Total.Denied != 0 {
		t.Errorf("no keys: %+v", r.Total)
	}
}

// A run whose record cannot be read is named, and counts nothing.
func TestComputeNamesAnUnreadableRun(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := cas.NewBlock(cas.Raw, []byte("not a record"))
	if err := f.st.Put(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := f.st.SetRef(ctx, scheduler.RefNamespace, "run-broken", b.CID()); err != nil {
		t.Fatal(err)
	}
	r := compute(t, f.st, metrics.Options{Trusted: trusted})
	if r.Runs.Listed != 3 || r.Runs.Counted != 2 || len(r.Runs.Unreadable) != 1 || r.Runs.Unreadable[0].Run != "run-broken" || r.Total.Receipts != 4 {
		t.Errorf("runs %+v, total %d receipts", r.Runs, r.Total.Receipts)
	}
}

// A damaged acceptance is the verifier's finding, not an error of the
// report: the receipt it accepted counts as unverified, and its run has
// no time to a verified result.
func TestComputeDamagedAcceptance(t *testing.T) {
	f := newFixture(t)
	n := f.converge.Nodes[0]
	if n.Acceptance == nil || !f.st.Corrupt(n.Acceptance.Cid, []byte("not an acceptance")) {
		t.Fatal("no acceptance to damage")
	}
	r := compute(t, f.st, metrics.Options{Trusted: trusted})
	c := class(t, r, "converge")
	if c.Unverified != 1 || c.Pass != 0 || c.RunToVerified.Count != 0 || c.UnverifiedBy["acceptance"] != 1 {
		t.Errorf("converge with a damaged acceptance: %+v", c)
	}
}

// Adversarial: a halted run's record edited to say done fails its
// outcome check: it is counted under no status, not as a done run, and
// the PASS it holds is no PASS a run that verifies stands behind.
func TestComputeForgedDoneIsNotADoneRun(t *testing.T) {
	f := newFixture(t)
	editRoot(t, f.st, f.stuck.Run, func(r map[string]any) { r["status"] = scheduler.StatusDone })
	r := compute(t, f.st, metrics.Options{Trusted: trusted})
	stuck := class(t, r, "stuck")
	if stuck.Runs != 1 || stuck.Done != 0 || stuck.Halted != 0 || stuck.RunsUnverified != 1 || stuck.RunToVerified.Count != 0 {
		t.Errorf("stuck recorded done: %+v", stuck)
	}
	if stuck.Pass != 0 || stuck.PassNotHeld != 1 || r.Total.Pass != 1 {
		t.Errorf("stuck recorded done: PASS %d, not held %d; total PASS %d; want 0, 1, 1", stuck.Pass, stuck.PassNotHeld, r.Total.Pass)
	}
	if len(r.Runs.Unverified) != 1 || r.Runs.Unverified[0].Run != f.stuck.Run || r.Runs.Unverified[0].Check != scheduler.CheckOutcome {
		t.Errorf("runs unverified: %+v", r.Runs.Unverified)
	}
}

// Adversarial: a PASS on a node the record says failed is no PASS: no
// run stands behind it.
func TestComputePassOfANodeNotDoneIsNotAPass(t *testing.T) {
	f := newFixture(t)
	editNode(t, f.st, f.stuck.Run, "easy", func(n map[string]any) { n["state"], n["reason"] = "failed", "rejected" })
	r := compute(t, f.st, metrics.Options{Trusted: trusted})
	stuck := class(t, r, "stuck")
	if stuck.Pass != 0 || stuck.PassNotHeld != 1 || stuck.Verified != 3 || r.Total.Pass != 1 {
		t.Errorf("stuck with easy failed: %+v; total PASS %d", stuck, r.Total.Pass)
	}
}

// A PASS a person withdrew (hg withdraw) is no PASS: it is counted as
// withdrawn.
func TestComputeWithdrawnPassIsNotAPass(t *testing.T) {
	f := newFixture(t)
	if _, _, err := scheduler.Withdraw(context.Background(), f.st, f.stuck.Run, "easy", scheduler.Actor{Who: "test"}, "bad output",
		time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		t.Fatal(err)
	}
	r := compute(t, f.st, metrics.Options{Trusted: trusted})
	stuck := class(t, r, "stuck")
	if stuck.Pass != 0 || stuck.Withdrawn != 1 || stuck.Verified != 3 || stuck.Halted != 1 {
		t.Errorf("stuck with easy withdrawn: %+v", stuck)
	}
	if r.Total.Pass != 1 || r.Total.Withdrawn != 1 || len(r.Runs.Unverified) != 0 {
		t.Errorf("total: PASS %d, withdrawn %d; runs unverified %+v; want 1, 1, none", r.Total.Pass, r.Total.Withdrawn, r.Runs.Unverified)
	}
}

// Adversarial: receipts that are not a node's work, set in a record as
// its earlier attempts or its receipt, count in nothing. The converge
// run's PASS (package guess) as an earlier attempt of the stuck run's
// fix (package guess too) is another run's: counted with that run only.
// Under peek (package peek), as an earlier attempt or as its receipt, it
// is not the node's work at all, nor as fix's receipt, which the record
// does not mark a memo hit: the run is named, and its record counts for
// nothing (its PASS among them).
func TestComputeReceiptsOfOtherWork(t *testing.T) {
	conv := func(f *fixture) cid.Cid { return receiptOf(t, f.converge, "fix") }

	f := newFixture(t)
	editNode(t, f.st, f.stuck.Run, "fix", func(n map[string]any) { n["earlier"] = []any{conv(f)} })
	r := compute(t, f.st, metrics.Options{Trusted: trusted})
	if stuck := class(t, r, "stuck"); stuck.Receipts != 3 || stuck.Pass != 1 || len(r.Runs.Unverified) != 0 || r.Total.Pass != 2 {
		t.Errorf("another run's receipt as fix's earlier attempt: stuck %+v, runs unverified %+v, total PASS %d", stuck, r.Runs.Unverified, r.Total.Pass)
	}

	for _, c := range []struct {
		node string
		edit func(*fixture, map[string]any)
	}{
		{"peek", func(f *fixture, n map[string]any) { n["earlier"] = []any{conv(f)} }},
		{"peek", func(f *fixture, n map[string]any) { n["receipt"] = conv(f); delete(n, "acceptance") }},
		{"fix", func(f *fixture, n map[string]any) { n["receipt"] = conv(f); delete(n, "acceptance") }},
	} {
		f := newFixture(t)
		editNode(t, f.st, f.stuck.Run, c.node, func(n map[string]any) { c.edit(f, n) })
		r := compute(t, f.st, metrics.Options{Trusted: trusted})
		stuck := class(t, r, "stuck")
		if stuck.Pass != 0 || r.Total.Pass != 1 || class(t, r, "converge").Pass != 1 {
			t.Errorf("converge's receipt under %s: stuck %+v; total PASS %d", c.node, stuck, r.Total.Pass)
		}
		if stuck.Halted != 0 || stuck.RunsUnverified != 1 {
			t.Errorf("the run holding it counted by its status: %+v", stuck)
		}
		if len(r.Runs.Unverified) != 1 || r.Runs.Unverified[0].Run != f.stuck.Run || !strings.Contains(r.Runs.Unverified[0].Detail, "not its work") {
			t.Errorf("runs unverified: %+v", r.Runs.Unverified)
		}
	}
}

// elsewhere runs the node's package on its input, under another run id.
type elsewhere struct{ inner scheduler.Engine }

func (e elsewhere) Invoke(ctx context.Context, inv scheduler.Invocation) (scheduler.Outcome, error) {
	inv.Run = "run-elsewhere"
	return e.inner.Invoke(ctx, inv)
}

// A receipt the scheduler rejected as no work of the node (here of
// another run id) stays in the record, with the acceptance that rejects
// it: it is counted in no run, and the halted run is sound.
func TestComputeRejectedReceiptOfOtherWork(t *testing.T) {
	st := memstore.New()
	plan, err := scheduler.Load("testdata/workorders/stuck.json")
	if err != nil {
		t.Fatal(err)
	}
	answers := map[string][]json.RawMessage{"fix": {json.RawMessage(`{"guess": "green"}`)}}
	local := &scheduler.Local{Key: key, Adapter: haygent.NewScript(answers),
		Package: func(inv scheduler.Invocation) (*haygent.Package, error) { return plan.Packages[inv.Node], nil }}
	s := scheduler.New(scheduler.Options{Store: scheduler.Shared{Store: st}, Key: key, NoCache: true, Engine: elsewhere{local}})
	ctx := context.Background()
	id, err := s.Start(ctx, plan, "")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.Execute(ctx, plan, id)
	if err != nil {
		t.Fatal(err)
	}
	easy := rec.Nodes[0]
	if easy.Name != "easy" || easy.State != "failed" || easy.Receipt == nil || easy.Acceptance == nil || !strings.Contains(easy.Reason, "is of run") {
		t.Fatalf("easy: %+v: want failed, its receipt rejected", easy)
	}
	r := compute(t, st, metrics.Options{Trusted: trusted})
	stuck := class(t, r, "stuck")
	if stuck.Halted != 1 || stuck.RunsUnverified != 0 || len(r.Runs.Unverified) != 0 {
		t.Errorf("a run that rejected a receipt: %+v, runs unverified %+v", stuck, r.Runs.Unverified)
	}
	if stuck.Pass != 0 || stuck.PassNotHeld != 0 || r.Total.Receipts != 0 {
		t.Errorf("the rejected receipts counted: %+v", r.Total)
	}
}

package scheduler_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/scheduler"
)

// node returns the named node of rec.
func node(t *testing.T, rec *scheduler.Record, name string) scheduler.NodeRecord {
	t.Helper()
	for _, n := range rec.Nodes {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("run %s has no node %s", rec.Run, name)
	return scheduler.NodeRecord{}
}

// retry resumes run with Retry, as a new process would, and returns how
// many invocations it ran and the record it left.
func retry(t *testing.T, st cas.Store, plan *scheduler.Plan, run string) (int, *scheduler.Record) {
	t.Helper()
	s := scheduler.New(scheduler.Options{Store: scheduler.Shared{Store: st}, Key: key, Retry: true})
	rec, err := s.Execute(context.Background(), plan, run)
	if err != nil {
		t.Fatal(err)
	}
	return s.Ran(), rec
}

// kinds lists the kinds of a record's events for node.
func kinds(rec *scheduler.Record, node string) []string {
	var out []string
	for _, ev := range rec.Events {
		if ev.Node == node {
			out = append(out, ev.Kind)
		}
	}
	return out
}

// A node that halts every time, retried four times: it is started three
// times in all (the run and two retries), the next retries do not start
// it, and it is blocked with its breaker open, in the stored record too.
// Only a reset, recorded with who and why, lets it run again, for as many
// attempts more; the run verifies with its events throughout.
func TestBreakerSurvivesResumes(t *testing.T) {
	st := memstore.New()
	ctx := context.Background()
	plan, err := scheduler.Load(workorders + "halting-branch.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := plan.MaxAttempts("probe"); got != 3 || scheduler.DefaultMaxAttempts != 3 {
		t.Fatalf("MaxAttempts = %d, want the default 3", got)
	}
	_, rec := execute(t, plan, scheduler.Options{Store: scheduler.Shared{Store: st}, NoCache: true})
	if p := node(t, rec, "probe"); p.State != dag.Failed || p.Attempts != 1 {
		t.Fatalf("first run: probe %s after %d attempts", p.State, p.Attempts)
	}
	wantRan := []int{1, 1, 0, 0}
	wantAttempts := []int64{2, 3, 3, 3}
	for i := range 4 {
		ran, got := retry(t, st, plan, rec.Run)
		p := node(t, got, "probe")
		if ran != wantRan[i] || p.Attempts != wantAttempts[i] {
			t.Errorf("retry %d: ran %d, probe attempts %d; want %d and %d", i+1, ran, p.Attempts, wantRan[i], wantAttempts[i])
		}
		if i >= 2 {
			if p.State != dag.Blocked || !p.Breaker || !strings.HasPrefix(p.Reason, "breaker open: started 3 times of 3 allowed") {
				t.Errorf("retry %d: probe %s, breaker %v, %q; want blocked with its breaker open", i+1, p.State, p.Breaker, p.Reason)
			}
			if !strings.Contains(got.Reason, "probe (blocked, breaker open)") || got.Status != scheduler.StatusHalted {
				t.Errorf("retry %d: run %s: %s", i+1, got.Status, got.Reason)
			}
			if d := node(t, got, "after-probe"); d.State != dag.Blocked {
				t.Errorf("retry %d: after-probe is %s below an open breaker", i+1, d.State)
			}
		}
	}
	stored, _, err := scheduler.LoadRecord(ctx, st, rec.Run)
	if err != nil {
		t.Fatal(err)
	}
	if p := node(t, stored, "probe"); !p.Breaker || p.State != dag.Blocked || len(p.Earlier) != 2 || p.Receipt == nil {
		t.Errorf("stored: probe %s, breaker %v, %d earlier receipts, receipt %v; want blocked, open, 2 earlier and the last", p.State, p.Breaker, len(p.Earlier), p.Receipt)
	}
	if k := kinds(stored, "probe"); len(k) != 1 || k[0] != scheduler.EventBreakerOpen {
		t.Errorf("stored events of probe: %v, want one breaker-open", k)
	}
	if v := verifyRun(t, st, recordCID(t, st, rec.Run), runTrusted); !v.OK() {
		t.Error("the run with an open breaker does not verify")
	}

	// Reset: the node runs on the next retry, three times more at most.
	by := scheduler.Actor{Who: "alice", Key: "ed25519:test"}
	if _, err := scheduler.ResetBreaker(ctx, st, rec.Run, "probe", by, "the fixture was fixed", "2030-01-01T00:00:00Z"); err != nil {
		t.Fatal(err)
	}
	reset, _, err := scheduler.LoadRecord(ctx, st, rec.Run)
	if err != nil {
		t.Fatal(err)
	}
	ev := reset.Events[len(reset.Events)-1]
	if ev.Kind != scheduler.EventBreakerReset || ev.Node != "probe" || ev.Who != "alice" || ev.Key != "ed25519:test" ||
		ev.Reason != "the fixture was fixed" || ev.Attempts != 3 || ev.At != "2030-01-01T00:00:00Z" {
		t.Errorf("reset event %+v", ev)
	}
	if p := node(t, reset, "probe"); p.Breaker || p.BreakerBase != 3 {
		t.Errorf("after the reset: breaker %v, base %d", p.Breaker, p.BreakerBase)
	}
	for i, want := range []int{1, 1, 1, 0} {
		ran, got := retry(t, st, plan, rec.Run)
		if ran != want {
			t.Errorf("retry %d after the reset: ran %d, want %d (probe attempts %d)", i+1, ran, want, node(t, got, "probe").Attempts)
		}
	}
	final, _, _ := scheduler.LoadRecord(ctx, st, rec.Run)
	if p := node(t, final, "probe"); p.Attempts != 6 || !p.Breaker {
		t.Errorf("after three more: probe attempts %d, breaker %v; want 6, open", p.Attempts, p.Breaker)
	}
	if k := kinds(final, "probe"); strings.Join(k, " ") != "breaker-open breaker-reset breaker-open" {
		t.Errorf("events of probe: %v", k)
	}
	if v := verifyRun(t, st, recordCID(t, st, rec.Run), runTrusted); !v.OK() {
		t.Error("the run does not verify after a reset")
	}
	// A reset of a node not started since, or of a done one, is refused.
	if _, err := scheduler.ResetBreaker(ctx, st, rec.Run, "steady", by, "why", "2030-01-01T00:00:00Z"); err == nil {
		t.Error("reset of a done node taken")
	}
	if _, err := scheduler.ResetBreaker(ctx, st, rec.Run, "nosuch", by, "why", "2030-01-01T00:00:00Z"); err == nil {
		t.Error("reset of an unknown node taken")
	}
}

// The limit comes from the Work Order's max_attempts, else from the
// package manifest's, else the default; the order's wins over the
// manifest's.
func TestBreakerLimitFromWorkOrderAndManifest(t *testing.T) {
	dir := t.TempDir()
	fail := filepath.Join(dir, "fail")
	if err := os.CopyFS(fail, os.DirFS("../fixtures/haygents/fail")); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(fail, "haygent.manifest.json")
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	data = []byte(strings.Replace(string(data), "{", `{"max_attempts": 1,`, 1))
	if err := os.WriteFile(manifest, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// A manifest's max_attempts is 1 to 100.
	bad := filepath.Join(dir, "bad")
	if err := os.CopyFS(bad, os.DirFS(fail)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "haygent.manifest.json"), []byte(strings.Replace(string(data), `"max_attempts": 1`, `"max_attempts": 101`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := haygent.Load(bad); err == nil || !strings.Contains(err.Error(), "max_attempts 101: want 1 to 100") {
		t.Errorf("a manifest's max_attempts of 101: %v", err)
	}
	write := func(name, extra string) *scheduler.Plan {
		p := filepath.Join(dir, name)
		wo := `{"workorder": "w", "objective": "o", "nodes": {"a": {"haygent": "fail", "input": {"value": "v"}}}` + extra + `}`
		if err := os.WriteFile(p, []byte(wo), 0o644); err != nil {
			t.Fatal(err)
		}
		plan, err := scheduler.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		return plan
	}
	for _, tc := range []struct {
		name, extra string
		want        int64
	}{
		{"manifest.json", "", 1},
		{"order.json", `, "max_attempts": 2`, 2},
	} {
		plan := write(tc.name, tc.extra)
		if got := plan.MaxAttempts("a"); got != tc.want {
			t.Errorf("%s: MaxAttempts %d, want %d", tc.name, got, tc.want)
		}
		st := memstore.New()
		_, rec := execute(t, plan, scheduler.Options{Store: scheduler.Shared{Store: st}, NoCache: true})
		started := int64(1)
		for range 3 {
			ran, _ := retry(t, st, plan, rec.Run)
			started += int64(ran)
		}
		// Resumed from the store alone, as hg resume does: the same limit.
		stored, _, cleanup, err := scheduler.PlanFromStore(context.Background(), st, rec.Run)
		if err != nil {
			t.Fatal(err)
		}
		ran, got := retry(t, st, stored, rec.Run)
		cleanup()
		started += int64(ran)
		if a := node(t, got, "a"); started != tc.want || a.Attempts != tc.want || !a.Breaker {
			t.Errorf("%s: started %d times (attempts %d, breaker %v), want %d", tc.name, started, a.Attempts, a.Breaker, tc.want)
		}
	}
}

// A node that was running when its process died, as often as its limit
// allows (it killed the process each time, say), is not started again by
// a plain resume: its breaker opens.
func TestBreakerCountsStartsThatNeverEnded(t *testing.T) {
	st := memstore.New()
	ctx := context.Background()
	plan := echoPlan(t, `{"a": {"haygent": "ECHO", "input": {"value": "v"}}, "b": {"haygent": "ECHO", "needs": ["a"], "input": {"value": "w"}}}`, "")
	s := scheduler.New(scheduler.Options{Store: scheduler.Shared{Store: st}, Key: key})
	id, err := s.Start(ctx, plan, "")
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := scheduler.LoadRecord(ctx, st, id)
	if err != nil {
		t.Fatal(err)
	}
	rec.Nodes[0].State, rec.Nodes[0].Attempts = dag.Active, 3
	if err := st.SetRef(ctx, scheduler.RefNamespace, id, storeRecord(t, st, rec)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Execute(ctx, plan, id)
	if err != nil {
		t.Fatal(err)
	}
	if s.Ran() != 0 || node(t, got, "a").State != dag.Blocked || !node(t, got, "a").Breaker || node(t, got, "b").State != dag.Blocked {
		t.Errorf("ran %d; a %s (breaker %v), b %s", s.Ran(), node(t, got, "a").State, node(t, got, "a").Breaker, node(t, got, "b").State)
	}
}

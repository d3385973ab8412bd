package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/scheduler"
)

// The recheck log keeps every re-measurement, oldest first, one that
// does not fit a block split into several; a run's ref that names
// another run's recheck is refused; hg run rm takes the log with the run.
func TestRecheckLog(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	_, rec := run(t, st, "pipeline.json", scheduler.Options{})
	at, err := st.GetRef(ctx, scheduler.RefNamespace, rec.Run)
	if err != nil {
		t.Fatal(err)
	}
	if log, err := scheduler.Rechecks(ctx, st, rec.Run); err != nil || log != nil {
		t.Fatalf("a run never rechecked: %v, %v", log, err)
	}
	entry := func(i int) scheduler.RecheckEntry {
		n := rec.Nodes[i%len(rec.Nodes)]
		return scheduler.RecheckEntry{Node: fmt.Sprintf("%s-%d", n.Name, i), Receipt: *n.Receipt, Result: scheduler.RecheckHolds}
	}
	first := scheduler.Recheck{Run: rec.Run, Record: cas.Link{Cid: at}, At: "2026-12-01T10:00:00Z", Who: "a",
		Nodes: []scheduler.RecheckEntry{entry(0)}}
	if _, err := scheduler.RecordRecheck(ctx, st, first); err != nil {
		t.Fatal(err)
	}
	big := scheduler.Recheck{Run: rec.Run, Record: cas.Link{Cid: at}, At: "2026-12-01T11:00:00Z", Who: "b", Replay: true}
	for i := range 2500 {
		big.Nodes = append(big.Nodes, entry(i))
	}
	head, err := scheduler.RecordRecheck(ctx, st, big)
	if err != nil {
		t.Fatal(err)
	}
	log, err := scheduler.Rechecks(ctx, st, rec.Run)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	total := 0
	for i, r := range log {
		sizes = append(sizes, len(r.Nodes))
		total += len(r.Nodes)
		if r.Type != scheduler.TypeRecheck || (i > 0 && r.Prior == nil) || (i == 0) != (r.Prior == nil) {
			t.Errorf("block %d: type %s, prior %v", i, r.Type, r.Prior)
		}
	}
	if fmt.Sprint(sizes) != "[1 1024 1024 452]" || log[0].Who != "a" || log[3].Who != "b" || !log[3].Replay || log[3].Nodes[451].Node != entry(2499).Node {
		t.Errorf("log of %v entries, %d in all: %+v", sizes, total, log[0])
	}
	if got, _ := st.GetRef(ctx, scheduler.RecheckNamespace, rec.Run); got != head {
		t.Errorf("ref names %s, want the newest block %s", got, head)
	}
	// Another run's log under this run's name.
	if err := st.SetRef(ctx, scheduler.RecheckNamespace, "run-other", head); err != nil {
		t.Fatal(err)
	}
	if _, err := scheduler.Rechecks(ctx, st, "run-other"); !errors.Is(err, cas.ErrInvalid) {
		t.Errorf("another run's log: %v, want ErrInvalid", err)
	}
	if _, err := scheduler.RecordRecheck(ctx, st, scheduler.Recheck{Run: "not/a/run"}); err == nil {
		t.Error("a recheck of no run id was recorded")
	}
	if _, err := scheduler.RemoveRun(ctx, st, rec.Run, scheduler.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetRef(ctx, scheduler.RecheckNamespace, rec.Run); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("the recheck log outlived its run: %v", err)
	}
}

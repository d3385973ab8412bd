package scheduler

import (
	"context"
	"fmt"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/internal/textsafe"
	"github.com/ipfs/go-cid"
)

// Regression is where a recheck regressed a receipt: the run whose
// record holds the event, and the event.
type Regression struct {
	Run   string
	Event RunEvent
}

// String says where and why the receipt regressed, as one line of ledger
// text (escape it for a terminal).
func (g Regression) String() string {
	return fmt.Sprintf("regressed in run %s at %s (node %s): %s: %s", g.Run, g.Event.At, g.Event.Node, g.Event.Check, g.Event.Reason)
}

// Regressions returns every receipt a recheck regressed in a run of st
// (its latest record, which keeps every event), with the first run by id
// that records it. A receipt never changes and still verifies after a
// recheck found that it no longer holds: this is where that finding
// is. A record that cannot be read is an error: whether it regressed a
// receipt cannot be known.
func Regressions(ctx context.Context, st cas.Store) (map[cid.Cid]Regression, error) {
	refs, err := st.Refs(ctx, RefNamespace)
	if err != nil {
		return nil, err
	}
	out := map[cid.Cid]Regression{}
	for _, r := range refs {
		rec, err := LoadRecordAt(ctx, st, r.CID)
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", textsafe.Escape(r.Name), err)
		}
		for _, g := range RegressionsOf(r.Name, rec) {
			if _, ok := out[g.Event.Receipt.Cid]; !ok {
				out[g.Event.Receipt.Cid] = g
			}
		}
	}
	return out, nil
}

// RegressionsOf returns the regressions the record rec of run holds,
// each naming a receipt, in the record's order.
func RegressionsOf(run string, rec *Record) []Regression {
	var out []Regression
	for _, ev := range rec.Events {
		if ev.Kind == EventRegressed && ev.Receipt != nil {
			out = append(out, Regression{Run: run, Event: ev})
		}
	}
	return out
}

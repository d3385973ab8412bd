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

// RegressionSet is the receipts a recheck regressed, by their canonical
// CIDs ([cas.Canonical]), each with the first run by id that records it.
type RegressionSet map[cid.Cid]Regression

// Of returns where receipt c regressed, if it did: looked up by c's
// canonical CID, so that the receipt's bytes stored again under another
// hash function are the same receipt. A receipt that cannot be read is
// looked up by c as it is (its verification fails anyway); err is ctx's.
func (s RegressionSet) Of(ctx context.Context, st cas.BlockReader, c cid.Cid) (Regression, bool, error) {
	key, err := cas.Canonical(ctx, st, c)
	if err != nil {
		if ctx.Err() != nil {
			return Regression{}, false, ctx.Err()
		}
		key = c
	}
	g, ok := s[key]
	return g, ok, nil
}

// Regressions returns every receipt a recheck regressed in a run of st
// (its latest record, which keeps every event), with the first run by id
// that records it. A receipt never changes and still verifies after a
// recheck found that it no longer holds: this is where that finding
// is. A record that cannot be read is an error: whether it regressed a
// receipt cannot be known.
func Regressions(ctx context.Context, st cas.Store) (RegressionSet, error) {
	refs, err := st.Refs(ctx, RefNamespace)
	if err != nil {
		return nil, err
	}
	out := RegressionSet{}
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

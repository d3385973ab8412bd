package ledger

import (
	"context"
	"fmt"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// Ledger is a receipt with everything it links to, read back from the
// store: the material of a report, and of verification.
type Ledger struct {
	ReceiptCID  cid.Cid
	Receipt     *Receipt
	Transitions []*Transition // in order, first to head
	Evidence    map[cid.Cid]*Evidence
	Gates       map[cid.Cid]*GateResult
	SlotCalls   map[cid.Cid]*SlotCall
	// Tails are the last lines of the output of every exec step that
	// failed (exited other than 0 or timed out), by its exit evidence:
	// what a report shows under the step.
	Tails map[cid.Cid]*Tail
}

// LoadReceipt reads and strictly decodes a receipt.
func LoadReceipt(ctx context.Context, st cas.Store, c cid.Cid) (*Receipt, error) {
	var r Receipt
	if err := LoadTyped(ctx, st, c, &r); err != nil {
		return nil, err
	}
	if r.Type != TypeReceipt {
		return nil, fmt.Errorf("%s is a %q, not a receipt: %w", c, r.Type, cas.ErrInvalid)
	}
	return &r, nil
}

func LoadTyped(ctx context.Context, st cas.Store, c cid.Cid, v any) error {
	if c.Type() != cas.DagCBOR {
		return fmt.Errorf("%s is not a DAG-CBOR object: %w", c, cas.ErrInvalid)
	}
	err := st.View(ctx, c, func(data []byte) error { return cas.Unmarshal(data, v) })
	if err != nil {
		return fmt.Errorf("read %s: %w", c, err)
	}
	return nil
}

// LoadLedger reads a receipt and its transition chain, evidence, gate
// results and slot calls.
func LoadLedger(ctx context.Context, st cas.Store, c cid.Cid) (*Ledger, error) {
	r, err := LoadReceipt(ctx, st, c)
	if err != nil {
		return nil, err
	}
	l := &Ledger{ReceiptCID: c, Receipt: r, Evidence: map[cid.Cid]*Evidence{}, Gates: map[cid.Cid]*GateResult{}, SlotCalls: map[cid.Cid]*SlotCall{}}
	next := &r.Head
	for next != nil {
		var t Transition
		if err := LoadTyped(ctx, st, next.Cid, &t); err != nil {
			return nil, err
		}
		if t.Type != TypeTransition {
			return nil, fmt.Errorf("%s is not a transition: %w", next.Cid, cas.ErrInvalid)
		}
		l.Transitions = append(l.Transitions, &t)
		if int64(len(l.Transitions)) > r.Transitions {
			return nil, fmt.Errorf("receipt %s: the chain is longer than the %d transitions it claims: %w", c, r.Transitions, cas.ErrInvalid)
		}
		next = t.Prior
		for _, e := range t.Evidence {
			var ev Evidence
			if err := LoadTyped(ctx, st, e.Cid, &ev); err != nil {
				return nil, err
			}
			l.Evidence[e.Cid] = &ev
		}
		for _, g := range t.Gates {
			var gr GateResult
			if err := LoadTyped(ctx, st, g.Cid, &gr); err != nil {
				return nil, err
			}
			l.Gates[g.Cid] = &gr
		}
		for _, s := range t.SlotCalls {
			var sc SlotCall
			if err := LoadTyped(ctx, st, s.Cid, &sc); err != nil {
				return nil, err
			}
			l.SlotCalls[s.Cid] = &sc
		}
	}
	for i, j := 0, len(l.Transitions)-1; i < j; i, j = i+1, j-1 {
		l.Transitions[i], l.Transitions[j] = l.Transitions[j], l.Transitions[i]
	}
	l.Tails = loadTails(ctx, st, l)
	return l, nil
}

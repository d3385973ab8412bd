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
// results and slot calls ([ReadChain]). Any object that cannot be read,
// or is not of its type, is an error: a report shows a whole ledger or
// none.
func LoadLedger(ctx context.Context, st cas.Store, c cid.Cid) (*Ledger, error) {
	r, err := LoadReceipt(ctx, st, c)
	if err != nil {
		return nil, err
	}
	l := &Ledger{ReceiptCID: c, Receipt: r, Evidence: map[cid.Cid]*Evidence{}, Gates: map[cid.Cid]*GateResult{}, SlotCalls: map[cid.Cid]*SlotCall{}}
	read := func(c cid.Cid, what, typ string, v any) (bool, error) {
		if err := LoadTyped(ctx, st, c, v); err != nil {
			return false, err
		}
		if got := TypeOf(v); got != typ {
			return false, fmt.Errorf("%s is a %q, not a %s: %w", c, got, what, cas.ErrInvalid)
		}
		return true, nil
	}
	chain, problems, _, err := ReadChain(r, read, nil)
	if err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("receipt %s: %s: %w", c, problems[0], cas.ErrInvalid)
	}
	for _, n := range chain {
		l.Transitions = append(l.Transitions, n.T)
		for i, e := range n.T.Evidence {
			l.Evidence[e.Cid] = n.Evidence[i]
		}
		for i, g := range n.T.Gates {
			l.Gates[g.Cid] = n.Gates[i]
		}
		for i, s := range n.T.SlotCalls {
			l.SlotCalls[s.Cid] = n.SlotCalls[i]
		}
	}
	l.Tails = loadTails(ctx, st, l)
	return l, nil
}

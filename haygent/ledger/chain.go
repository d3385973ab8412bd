package ledger

import (
	"fmt"
	"slices"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// ChainNode is one transition of a receipt's chain and the objects it
// links, as read.
type ChainNode struct {
	CID       cid.Cid
	T         *Transition
	Evidence  []*Evidence   // parallel to T.Evidence; nil where unreadable
	Gates     []*GateResult // parallel to T.Gates; nil where unreadable
	SlotCalls []*SlotCall   // parallel to T.SlotCalls; nil where unreadable
}

// ObjectReader reads the typed object c, of type typ ("transition",
// "evidence", ... in what), into v. It returns false when the object
// cannot be read or is not a typ, having recorded why if it goes on; an
// error ends the reading (the store failed, or the reader gives up).
type ObjectReader func(c cid.Cid, what, typ string, v any) (bool, error)

// ReadChain follows the receipt's Head through Prior with read, and reads
// the evidence, gate results and slot calls of each transition; each,
// when not nil, is called with every transition as soon as it is read. It
// returns the transitions oldest first, the problems met (a transition
// that cannot be read, which ends the chain there; a chain longer than
// the receipt counts), and whether the chain was read to a transition
// without Prior. This is the one reading of a chain: [LoadLedger] and the
// verifier both use it.
func ReadChain(r *Receipt, read ObjectReader, each func(*ChainNode) error) (chain []*ChainNode, problems []string, complete bool, err error) {
	limit := max(r.Transitions, 0)
	next := &r.Head
	complete = true
	for next != nil {
		if int64(len(chain)) >= limit {
			problems = append(problems, fmt.Sprintf("the chain is longer than the %d transitions the receipt counts: transition %s is one too many", r.Transitions, next.Cid))
			complete = false
			break
		}
		var t Transition
		ok, err := read(next.Cid, "transition", TypeTransition, &t)
		if err != nil {
			return nil, problems, false, err
		}
		if !ok {
			where := "the head"
			if len(chain) > 0 {
				where = fmt.Sprintf("the prior of seq %d", chain[len(chain)-1].T.Seq)
			}
			problems = append(problems, fmt.Sprintf("transition %s (%s) cannot be read, so the chain cannot be followed past it", next.Cid, where))
			complete = false
			break
		}
		n := &ChainNode{CID: next.Cid, T: &t}
		if n.Evidence, err = readAll[Evidence](read, t.Evidence, "evidence", TypeEvidence); err != nil {
			return nil, problems, false, err
		}
		if n.Gates, err = readAll[GateResult](read, t.Gates, "gate result", TypeGate); err != nil {
			return nil, problems, false, err
		}
		if n.SlotCalls, err = readAll[SlotCall](read, t.SlotCalls, "slot call", TypeSlotCall); err != nil {
			return nil, problems, false, err
		}
		if each != nil {
			if err := each(n); err != nil {
				return nil, problems, false, err
			}
		}
		chain = append(chain, n)
		next = t.Prior
	}
	slices.Reverse(chain)
	return chain, problems, complete, nil
}

// readAll reads the objects links name, nil for each that cannot be read.
func readAll[T any](read ObjectReader, links []cas.Link, what, typ string) ([]*T, error) {
	out := make([]*T, 0, len(links))
	for _, l := range links {
		v := new(T)
		ok, err := read(l.Cid, what, typ, v)
		if err != nil {
			return nil, err
		}
		if !ok {
			v = nil
		}
		out = append(out, v)
	}
	return out, nil
}

package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/ipfs/go-cid"
)

func put(t *testing.T, st cas.Store, v any) cid.Cid {
	t.Helper()
	data, err := cas.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	b := cas.NewBlock(cas.DagCBOR, data)
	if err := st.Put(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	return b.CID()
}

// The one reading of a chain: LoadLedger refuses what ReadChain reports
// (a chain longer than the receipt counts, an object of the wrong type in
// a transition's place), and both read a good chain oldest first.
func TestReadChainAndLoadLedger(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	ev := put(t, st, &ledger.Evidence{Type: ledger.TypeEvidence, Kind: "exit", Data: map[string]any{}})
	link := cas.Link{Cid: ev} // where a link is required and not read here
	first := put(t, st, &ledger.Transition{Type: ledger.TypeTransition, Seq: 0, Evidence: []cas.Link{{Cid: ev}}, Input: link, Output: link, Package: link, Permissions: link})
	second := put(t, st, &ledger.Transition{Type: ledger.TypeTransition, Seq: 1, Prior: &cas.Link{Cid: first}, Input: link, Output: link, Package: link, Permissions: link})
	receipt := func(head cid.Cid, n int64) cid.Cid {
		return put(t, st, &ledger.Receipt{Type: ledger.TypeReceipt, Head: cas.Link{Cid: head}, Transitions: n, Package: link, Input: link, Permissions: link})
	}

	l, err := ledger.LoadLedger(ctx, st, receipt(second, 2))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Transitions) != 2 || l.Transitions[0].Seq != 0 || l.Transitions[1].Seq != 1 || l.Evidence[ev] == nil {
		t.Fatalf("ledger read wrong: %d transitions, evidence %v", len(l.Transitions), l.Evidence)
	}

	_, err = ledger.LoadLedger(ctx, st, receipt(second, 1))
	if !errors.Is(err, cas.ErrInvalid) || !strings.Contains(err.Error(), "longer than the 1 transitions") {
		t.Fatalf("a chain longer than counted: %v", err)
	}
	// An object shaped as a transition but typed otherwise.
	wrong := put(t, st, &ledger.Transition{Type: ledger.TypeEvidence, Input: link, Output: link, Package: link, Permissions: link})
	_, err = ledger.LoadLedger(ctx, st, receipt(wrong, 1))
	if !errors.Is(err, cas.ErrInvalid) || !strings.Contains(err.Error(), "not a transition") {
		t.Fatalf("another type in a transition's place: %v", err)
	}
	// Evidence is not a transition at all: it does not decode as one.
	if _, err = ledger.LoadLedger(ctx, st, receipt(ev, 1)); err == nil {
		t.Fatal("evidence in a transition's place loads")
	}

	// A tolerant reader, as the verifier's: an unreadable transition ends
	// the chain with a problem, not an error.
	r, err := ledger.LoadReceipt(ctx, st, receipt(second, 2))
	if err != nil {
		t.Fatal(err)
	}
	var seen []int64
	chain, problems, complete, err := ledger.ReadChain(r, func(c cid.Cid, what, typ string, v any) (bool, error) {
		if c == first {
			return false, nil
		}
		return true, ledger.LoadTyped(ctx, st, c, v)
	}, func(n *ledger.ChainNode) error { seen = append(seen, n.T.Seq); return nil })
	if err != nil || complete || len(chain) != 1 || len(problems) != 1 || !strings.Contains(problems[0], "cannot be followed past it") || len(seen) != 1 || seen[0] != 1 {
		t.Fatalf("chain %d, problems %q, complete %v, seen %v, err %v", len(chain), problems, complete, seen, err)
	}
}

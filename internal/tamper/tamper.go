// Package tamper damages stored receipt chains the ways an attacker or a
// faulty runner would, for the tests that prove the verifier notices:
// transitions swapped or spliced in from another run, a status forged and
// re-signed, evidence removed, a gate predicate changed after the run, an
// approval used after it expired. Each function writes new objects next to
// the old ones and returns the CID of the receipt to verify.
package tamper

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/ipfs/go-cid"
)

// Kinds lists the tampering [Apply] knows.
var Kinds = []string{"swap", "splice", "forge-pass", "drop-evidence", "change-gate", "approval-late"}

// Apply tampers with receipt in st as kind says and returns the receipt to
// verify. key re-signs where the kind calls for a signature; donor is the
// other run's receipt "splice" takes a transition from.
func Apply(ctx context.Context, st cas.Store, kind string, receipt, donor cid.Cid, key ed25519.PrivateKey) (cid.Cid, error) {
	t := &tamperer{ctx: ctx, st: st, key: key}
	r, err := t.receipt(receipt)
	if err != nil {
		return cid.Undef, err
	}
	chain, err := t.chain(r)
	if err != nil {
		return cid.Undef, err
	}
	switch kind {
	case "swap":
		// The first two transitions trade places; each keeps its seq.
		if len(chain) < 2 {
			return cid.Undef, fmt.Errorf("swap: the chain has %d transitions", len(chain))
		}
		chain[0], chain[1] = chain[1], chain[0]
		return t.relink(r, chain)
	case "splice":
		if !donor.Defined() {
			return cid.Undef, fmt.Errorf("splice: no donor receipt")
		}
		d, err := t.receipt(donor)
		if err != nil {
			return cid.Undef, err
		}
		dchain, err := t.chain(d)
		if err != nil {
			return cid.Undef, err
		}
		if len(dchain) < 2 || len(chain) < 2 {
			return cid.Undef, fmt.Errorf("splice: chains too short")
		}
		chain[1] = dchain[1]
		return t.relink(r, chain)
	case "forge-pass":
		r.Status, r.Halt = ledger.StatusPass, nil
		out, err := t.put(&ledger.Packet{Type: ledger.TypePacket, Schema: haygent.OutputSchema, Payload: map[string]any{}})
		if err != nil {
			return cid.Undef, err
		}
		r.Output = &out
		return t.sign(r)
	case "drop-evidence":
		if len(r.Evidence) == 0 {
			return cid.Undef, fmt.Errorf("drop-evidence: the receipt records no evidence")
		}
		return receipt, st.Delete(ctx, r.Evidence[0].Cid)
	case "change-gate":
		return t.changeGate(receipt, r)
	case "approval-late":
		return t.approvalLate(receipt)
	}
	return cid.Undef, fmt.Errorf("unknown tampering %q (known: %v)", kind, Kinds)
}

type tamperer struct {
	ctx context.Context
	st  cas.Store
	key ed25519.PrivateKey
}

func (t *tamperer) receipt(c cid.Cid) (*ledger.Receipt, error) {
	return ledger.LoadReceipt(t.ctx, t.st, c)
}

func (t *tamperer) load(c cid.Cid, v any) error {
	return t.st.View(t.ctx, c, func(d []byte) error { return cas.Unmarshal(d, v) })
}

func (t *tamperer) put(v any) (cas.Link, error) {
	data, err := cas.Marshal(v)
	if err != nil {
		return cas.Link{}, err
	}
	b := cas.NewBlock(cas.DagCBOR, data)
	return cas.Link{Cid: b.CID()}, t.st.Put(t.ctx, b)
}

// chain returns the receipt's transitions, oldest first.
func (t *tamperer) chain(r *ledger.Receipt) ([]ledger.Transition, error) {
	var ts []ledger.Transition
	for next := &r.Head; next != nil; {
		var tr ledger.Transition
		if err := t.load(next.Cid, &tr); err != nil {
			return nil, err
		}
		ts = append([]ledger.Transition{tr}, ts...)
		next = tr.Prior
	}
	return ts, nil
}

// relink stores ts as a chain, points r at its head and re-signs it.
func (t *tamperer) relink(r *ledger.Receipt, ts []ledger.Transition) (cid.Cid, error) {
	var prior *cas.Link
	for _, tr := range ts {
		tr.Prior = prior
		l, err := t.put(&tr)
		if err != nil {
			return cid.Undef, err
		}
		prior = &l
	}
	r.Head, r.Transitions = *prior, int64(len(ts))
	return t.sign(r)
}

func (t *tamperer) sign(r *ledger.Receipt) (cid.Cid, error) {
	r.Signature = nil
	if err := r.Sign(t.key, nil); err != nil {
		return cid.Undef, err
	}
	l, err := t.put(r)
	return l.Cid, err
}

// changeGate stores the receipt's package with every gate predicate made
// stricter and points the receipt and its chain at it, as if the package
// had been edited after the run and the receipt re-signed.
func (t *tamperer) changeGate(receipt cid.Cid, r *ledger.Receipt) (cid.Cid, error) {
	dir, err := os.MkdirTemp("", "hg-tamper-*")
	if err != nil {
		return cid.Undef, err
	}
	defer os.RemoveAll(dir)
	pkgDir := filepath.Join(dir, "pkg")
	if err := cas.GetTree(t.ctx, t.st, r.Package.Cid, pkgDir, nil); err != nil {
		return cid.Undef, err
	}
	gates := filepath.Join(pkgDir, "gates", "gates.json")
	data, err := os.ReadFile(gates)
	if err != nil {
		return cid.Undef, err
	}
	changed := bytes.ReplaceAll(data, []byte(`"predicate": "`), []byte(`"predicate": "has(ev.tampered) && `))
	if bytes.Equal(changed, data) {
		return cid.Undef, fmt.Errorf("change-gate: no predicate found in gates.json")
	}
	if err := os.WriteFile(gates, changed, 0o644); err != nil {
		return cid.Undef, err
	}
	pkg, err := cas.PutTree(t.ctx, t.st, pkgDir, nil)
	if err != nil {
		return cid.Undef, err
	}
	return Rewrite(t.ctx, t.st, receipt, t.key, func(typ string, n map[string]any) {
		if typ == ledger.TypeTransition || typ == ledger.TypeReceipt {
			n["package"] = pkg
		}
	})
}

// approvalLate moves the time of use of the first approval past its
// expiry while it stays recorded as valid.
func (t *tamperer) approvalLate(receipt cid.Cid) (cid.Cid, error) {
	var bad error
	moved := false
	c, err := Rewrite(t.ctx, t.st, receipt, t.key, func(typ string, n map[string]any) {
		if typ != ledger.TypeEvidence || n["kind"] != "approval" || moved {
			return
		}
		data, _ := n["data"].(map[string]any)
		exp, err := time.Parse(time.RFC3339Nano, fmt.Sprint(data["expires_at"]))
		if err != nil {
			bad = fmt.Errorf("approval-late: %v", err)
			return
		}
		n["observed_at"] = exp.Add(time.Minute).UTC().Format(time.RFC3339Nano)
		moved = true
	})
	switch {
	case err != nil:
		return cid.Undef, err
	case bad != nil:
		return cid.Undef, bad
	case !moved:
		return cid.Undef, fmt.Errorf("approval-late: the chain records no approval")
	}
	return c, nil
}

// Rewrite rewrites the ledger of receipt as someone holding key could:
// edit sees every transition, evidence, gate result, slot call, packet
// and the receipt as a data-model map, children before parents; every
// record is stored again, re-linked, up to a new receipt signed with key,
// whose CID it returns.
func Rewrite(ctx context.Context, st cas.Store, receipt cid.Cid, key ed25519.PrivateKey, edit func(typ string, node map[string]any)) (cid.Cid, error) {
	records := map[string]bool{ledger.TypeTransition: true, ledger.TypeEvidence: true, ledger.TypeGate: true,
		ledger.TypeSlotCall: true, ledger.TypePacket: true, ledger.TypeReceipt: true}
	done := map[cid.Cid]cid.Cid{}
	var relink func(v any) (any, error)
	relink = func(v any) (any, error) {
		switch x := v.(type) {
		case cid.Cid:
			if n, ok := done[x]; ok || x.Type() != cas.DagCBOR {
				if !ok {
					n = x
				}
				return n, nil
			}
			done[x] = x // a cycle cannot be, but a link never loops here
			data, err := st.Get(ctx, x)
			if err != nil {
				return nil, err
			}
			node, err := cas.DecodeNode(data)
			if err != nil {
				return nil, err
			}
			m, ok := node.(map[string]any)
			typ, _ := m["type"].(string)
			if !ok || !records[typ] {
				return x, nil
			}
			nv, err := relink(m)
			if err != nil {
				return nil, err
			}
			m = nv.(map[string]any)
			edit(typ, m)
			var b cas.Block
			if typ == ledger.TypeReceipt {
				delete(m, "signature")
				enc, err := cas.EncodeNode(m)
				if err != nil {
					return nil, err
				}
				var rc ledger.Receipt
				if err := cas.Unmarshal(enc, &rc); err != nil {
					return nil, err
				}
				if err := rc.Sign(key, nil); err != nil {
					return nil, err
				}
				if enc, err = cas.Marshal(&rc); err != nil {
					return nil, err
				}
				b = cas.NewBlock(cas.DagCBOR, enc)
			} else {
				enc, err := cas.EncodeNode(m)
				if err != nil {
					return nil, err
				}
				b = cas.NewBlock(cas.DagCBOR, enc)
			}
			if err := st.Put(ctx, b); err != nil {
				return nil, err
			}
			done[x] = b.CID()
			return b.CID(), nil
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				ne, err := relink(e)
				if err != nil {
					return nil, err
				}
				out[k] = ne
			}
			return out, nil
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				ne, err := relink(e)
				if err != nil {
					return nil, err
				}
				out[i] = ne
			}
			return out, nil
		}
		return v, nil
	}
	nc, err := relink(receipt)
	if err != nil {
		return cid.Undef, err
	}
	return nc.(cid.Cid), nil
}

package cas_test

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/ledger"
)

// Every typed object hg verifies has a plan, and the plan's verdict on
// every one-byte change of a sample agrees with the re-encoding's.
func TestCanonicalPlansOfObjects(t *testing.T) {
	l1 := cas.Link{Cid: cas.Sum(cas.DagCBOR, []byte("a"))}
	l2 := cas.Link{Cid: cas.Sum(cas.Raw, []byte("b"))}
	objects := []any{
		&ledger.Receipt{Type: ledger.TypeReceipt, Run: "r", Package: l1, Input: l2, Permissions: l1, Head: l2,
			Workspace: &l1, Output: &l2, Used: []string{"read:x"}, Denied: []ledger.Denied{{Verb: "v", Kind: "k", Target: "t", Rule: "r"}},
			Steps: []ledger.StepRun{{Step: "s", Kind: "exec", Attempt: 1, Status: "ok"}}, Evidence: []cas.Link{l1},
			Halt: &ledger.Halt{FailedGate: "g", LastEvidence: []cas.Link{l2}}, Transitions: 4, Signer: []byte{1, 2}, Signature: []byte{3}},
		&ledger.Transition{Type: ledger.TypeTransition, Run: "r", Seq: 3, Input: l1, Output: l2, Package: l1, Permissions: l2,
			Evidence: []cas.Link{l1, l2}, Prior: &l1, Note: "n", Adapter: "script"},
		&ledger.Packet{Type: ledger.TypePacket, Payload: map[string]any{"a": int64(1), "b": []any{"c", 2.5, nil}}, Upstream: []cas.Link{l1}, Schema: "s"},
		&ledger.Evidence{Type: ledger.TypeEvidence, Run: "r", Data: map[string]any{"exit": int64(0)},
			Coverage: ledger.Coverage{Establishes: []string{"x"}}},
		&ledger.GateResult{Type: ledger.TypeGate, Gate: "g", Read: []cas.Link{l1}},
		&ledger.SlotCall{Type: ledger.TypeSlotCall, Projection: l1, Response: l2, Errors: []string{"e"}, Proposal: &l1},
	}
	for _, obj := range objects {
		name := reflect.TypeOf(obj).Elem().Name()
		if !cas.HasPlan(obj) {
			t.Errorf("%s: no plan; Unmarshal encodes it again", name)
			continue
		}
		data, err := cas.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		fresh := func() any { return reflect.New(reflect.TypeOf(obj).Elem()).Interface() }
		if err := cas.Unmarshal(data, fresh()); err != nil {
			t.Fatalf("%s: its own encoding is refused: %v", name, err)
		}
		for i := range data {
			for _, b := range []byte{0x00, 0x01, 0x40, 0x60, 0x80, 0xa0, 0xf4, 0xf6, data[i] ^ 0x01} {
				v := bytes.Clone(data)
				v[i] = b
				fast, slow := fresh(), fresh()
				errFast, errSlow := cas.Unmarshal(v, fast), cas.UnmarshalReencode(v, slow)
				if errCheck := cas.Check(v, fresh()); (errCheck == nil) != (errFast == nil) {
					t.Fatalf("%s, byte %d set to 0x%02x: Check says %v, Unmarshal %v", name, i, b, errCheck, errFast)
				}
				switch {
				case errFast == nil && errSlow != nil:
					t.Fatalf("%s, byte %d set to 0x%02x: the plan accepts what the re-encoding refuses: %v", name, i, b, errSlow)
				case errFast == nil && !reflect.DeepEqual(fast, slow):
					t.Fatalf("%s, byte %d set to 0x%02x: the two decode differently", name, i, b)
				case errFast == nil:
					want, _ := cas.Links(cas.Sum(cas.DagCBOR, v), v)
					got, err := (&cas.Decoder{}).UnmarshalLinks(v, fresh())
					if err != nil || !slices.Equal(got, want) {
						t.Fatalf("%s, byte %d set to 0x%02x: UnmarshalLinks = %v, %v; want %v", name, i, b, got, err, want)
					}
				case errFast != nil && errSlow == nil && !strings.Contains(errFast.Error(), "outside the DAG-CBOR data model"):
					t.Fatalf("%s, byte %d set to 0x%02x: the plan refuses what the re-encoding accepts: %v", name, i, b, errFast)
				}
			}
		}
	}
}

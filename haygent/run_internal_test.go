package haygent

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent/gate"
	"github.com/haygent/hg/haygent/ledger"
)

// finish halts, and does not panic, when the state's output is not an
// object, even under an output contract that allows anything.
func TestFinishOutputNotObject(t *testing.T) {
	pkg, err := Load("../fixtures/haygents/echo")
	if err != nil {
		t.Fatal(err)
	}
	pkg.Output = nil // a contract that allows any output
	st := memstore.New()
	head := cas.Link{Cid: cas.Sum(cas.DagCBOR, []byte("head"))}
	r := &runner{
		ctx: context.Background(), pkg: pkg, st: st, w: cas.NewWriter(st),
		opts: Options{
			Key:   ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize)),
			Now:   func() time.Time { return time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC) },
			RunID: "run-output",
		},
		pkgCID: head.Cid, inputCID: head.Cid, permCID: head.Cid,
		state: map[string]any{"output": "hello"}, prior: &head,
		used: map[string]bool{}, artifacts: map[string]ledger.Artifact{},
	}
	res, err := r.finish(nil, []gateOutcome{{res: gate.Result{Gate: "ECHOED", Verdict: gate.Pass}, link: head}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := res.Receipt.Halt
	if res.Receipt.Status != ledger.StatusHalt || h == nil || h.Verdict != string(gate.Invalid) || !strings.Contains(h.Reason, "not a JSON object") {
		t.Fatalf("receipt %s, halt %+v; want an INVALID halt saying the output is not an object", res.Receipt.Status, h)
	}
}

package scheduler_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent/verify"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
)

var runTrusted = []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}

func verifyRun(t *testing.T, st cas.Store, c cid.Cid, trusted []ed25519.PublicKey) *scheduler.RunVerification {
	t.Helper()
	v, err := scheduler.VerifyRun(context.Background(), st, c, trusted, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range v.Checks {
		t.Logf("run  %-5v %-18s %s", ch.OK, ch.Name, ch.Detail)
	}
	for _, n := range v.Nodes {
		for _, ch := range n.Checks {
			if !ch.OK {
				t.Logf("%s FAIL %-18s %s", n.Node, ch.Name, ch.Detail)
			}
		}
	}
	return v
}

func recordCID(t *testing.T, st cas.Store, run string) cid.Cid {
	t.Helper()
	c, err := st.GetRef(context.Background(), scheduler.RefNamespace, run)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestVerifyRun(t *testing.T) {
	t.Run("pipeline, with a memo hit inside the run", func(t *testing.T) {
		st := memstore.New()
		_, rec := run(t, st, "pipeline.json", scheduler.Options{Jobs: 3})
		v := verifyRun(t, st, recordCID(t, st, rec.Run), runTrusted)
		if !v.OK() || len(v.Nodes) != 6 || v.Transitions() == 0 {
			node, c := v.FirstFailure()
			t.Fatalf("pipeline run does not verify: %s %+v (%d nodes)", node, c, len(v.Nodes))
		}
	})
	t.Run("second run, all memo hits", func(t *testing.T) {
		st := memstore.New()
		run(t, st, "pipeline.json", scheduler.Options{Jobs: 3})
		_, rec := run(t, st, "pipeline.json", scheduler.Options{Jobs: 3})
		if v := verifyRun(t, st, recordCID(t, st, rec.Run), runTrusted); !v.OK() {
			t.Fatal("a run of memo hits does not verify")
		}
	})
	t.Run("halting branch", func(t *testing.T) {
		st := memstore.New()
		_, rec := run(t, st, "halting-branch.json", scheduler.Options{Jobs: 2})
		v := verifyRun(t, st, recordCID(t, st, rec.Run), runTrusted)
		if !v.OK() || v.Status != scheduler.StatusHalted {
			t.Fatalf("honest halted run: ok %v status %s", v.OK(), v.Status)
		}
	})
	t.Run("untrusted runner", func(t *testing.T) {
		st := memstore.New()
		_, rec := run(t, st, "pipeline.json", scheduler.Options{Jobs: 3})
		v := verifyRun(t, st, recordCID(t, st, rec.Run), nil)
		if node, c := v.FirstFailure(); node == "" || c == nil || c.Name != verify.CheckTrust {
			t.Fatalf("first failure %s %+v, want a node's trusted signer", node, c)
		}
	})
	t.Run("receipt from another run spliced in", func(t *testing.T) {
		st := memstore.New()
		_, other := run(t, st, "pipeline.json", scheduler.Options{Jobs: 3, NoCache: true})
		_, rec := run(t, st, "pipeline.json", scheduler.Options{Jobs: 3, NoCache: true})
		// Point this run's "right" node at the other run's receipt and
		// acceptance, and store the record as if the scheduler had.
		for i, n := range rec.Nodes {
			if n.Name == "right" {
				for _, o := range other.Nodes {
					if o.Name == "right" {
						rec.Nodes[i].Receipt, rec.Nodes[i].Acceptance = o.Receipt, o.Acceptance
					}
				}
			}
		}
		c := storeRecord(t, st, rec)
		v := verifyRun(t, st, c, runTrusted)
		node, first := v.FirstFailure()
		if node != "right" || first == nil || first.Name != scheduler.CheckPlace || !strings.Contains(first.Detail, "is of run") {
			t.Fatalf("first failure %s %+v, want right's place in the run", node, first)
		}
	})
	t.Run("an earlier attempt of another package", func(t *testing.T) {
		st := memstore.New()
		_, rec := run(t, st, "halting-branch.json", scheduler.Options{Jobs: 2})
		var probe, steady *scheduler.NodeRecord
		for i := range rec.Nodes {
			switch rec.Nodes[i].Name {
			case "probe":
				probe = &rec.Nodes[i]
			case "steady":
				steady = &rec.Nodes[i]
			}
		}
		// steady (package echo) is given the HALT of probe (package
		// fail) as an earlier attempt; then an acceptance, no receipt.
		for _, forged := range []cas.Link{*probe.Receipt, *steady.Acceptance} {
			steady.Earlier = []cas.Link{forged}
			v := verifyRun(t, st, storeRecord(t, st, rec), runTrusted)
			if node, first := v.FirstFailure(); node != "steady" || first == nil || first.Name != scheduler.CheckEarlier {
				t.Fatalf("earlier attempt %s: first failure %s %+v, want steady's earlier attempts", forged.Cid, node, first)
			}
		}
	})
	t.Run("a regression of a receipt the node never held", func(t *testing.T) {
		// A regressed event on probe (failed: "done with a regressed
		// receipt" cannot catch it) naming a receipt: steady's, or its own.
		regress := func(which string) *scheduler.RunVerification {
			st := memstore.New()
			_, rec := run(t, st, "halting-branch.json", scheduler.Options{Jobs: 2})
			receipts := map[string]*cas.Link{}
			for _, n := range rec.Nodes {
				receipts[n.Name] = n.Receipt
			}
			rec.Events = append(rec.Events, scheduler.RunEvent{Kind: scheduler.EventRegressed, Node: "probe", From: dag.Done, To: dag.Failed,
				Receipt: receipts[which], Check: "block hashes", Reason: "forged", At: "2026-12-01T00:00:00Z"})
			return verifyRun(t, st, storeRecord(t, st, rec), runTrusted)
		}
		v := regress("steady")
		if node, first := v.FirstFailure(); node != "probe" || first == nil || first.Name != scheduler.CheckEvents || !strings.Contains(first.Detail, "never held") {
			t.Fatalf("first failure %s %+v, want probe's events", node, first)
		}
		if node, first := regress("probe").FirstFailure(); first != nil && first.Name == scheduler.CheckEvents {
			t.Fatalf("a regression of the node's own receipt: %s %+v", node, first)
		}
	})
	t.Run("done claimed for a halted run", func(t *testing.T) {
		st := memstore.New()
		_, rec := run(t, st, "halting-branch.json", scheduler.Options{Jobs: 2})
		rec.Status = scheduler.StatusDone
		v := verifyRun(t, st, storeRecord(t, st, rec), runTrusted)
		if node, first := v.FirstFailure(); node != "" || first == nil || first.Name != scheduler.CheckOutcome {
			t.Fatalf("first failure %s %+v, want the outcome", node, first)
		}
	})
	t.Run("a node recorded twice", func(t *testing.T) {
		st := memstore.New()
		_, rec := run(t, st, "pipeline.json", scheduler.Options{Jobs: 3})
		rec.Nodes = append(rec.Nodes[:1:1], rec.Nodes...)
		v := verifyRun(t, st, storeRecord(t, st, rec), runTrusted)
		if node, first := v.FirstFailure(); node != "" || first == nil || first.Name != scheduler.CheckRecord || !strings.Contains(first.Detail, "repeated") {
			t.Fatalf("first failure %s %+v, want the run record", node, first)
		}
	})
	t.Run("not a run record", func(t *testing.T) {
		st := memstore.New()
		_, rec := run(t, st, "pipeline.json", scheduler.Options{Jobs: 3})
		v := verifyRun(t, st, rec.Nodes[0].Receipt.Cid, runTrusted)
		if node, first := v.FirstFailure(); node != "" || first == nil || first.Name != scheduler.CheckRecord {
			t.Fatalf("first failure %s %+v, want the run record", node, first)
		}
	})
}

// storeRecord stores rec as the scheduler would and returns its root.
func storeRecord(t *testing.T, st cas.Store, rec *scheduler.Record) cid.Cid {
	t.Helper()
	blocks, root, err := scheduler.EncodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(context.Background(), blocks...); err != nil {
		t.Fatal(err)
	}
	return root
}

// A run of more nodes than one batch of signatures: the batches that
// hold spare each receipt's own check, the one holding a broken signature
// spares none, and only its node fails. Cancelling stops the verification.
func TestVerifyRunSignatureBatches(t *testing.T) {
	plan, err := scheduler.Load(writeWorkOrder(t, 150, "fanout"))
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	_, rec := execute(t, plan, scheduler.Options{Store: scheduler.Shared{Store: st}, Jobs: 2, NoCache: true})
	ctx := context.Background()
	const broken = 100
	n := &rec.Nodes[broken]
	var data []byte
	if err := st.View(ctx, n.Receipt.Cid, func(d []byte) error { data = bytes.Clone(d); return nil }); err != nil {
		t.Fatal(err)
	}
	sig, _ := cas.BytesEntry(data, "signature")
	bad := bytes.Clone(sig)
	bad[5] ^= 1
	value, err := cas.Marshal(bad)
	if err != nil {
		t.Fatal(err)
	}
	less, _ := cas.WithoutEntry(data, "signature")
	changed, ok := cas.WithEntry(less, "signature", value)
	if !ok {
		t.Fatal("cannot put the signature back")
	}
	b := cas.NewBlock(cas.DagCBOR, changed)
	if err := st.Put(ctx, b); err != nil {
		t.Fatal(err)
	}
	n.Receipt = &cas.Link{Cid: b.CID()}
	root := storeRecord(t, st, rec)

	// One batch ahead at most: the checks wait for the nodes.
	v, err := scheduler.VerifyRun(ctx, st, root, runTrusted, scheduler.SignaturesAhead(1))
	if err != nil {
		t.Fatal(err)
	}
	for i, nv := range v.Nodes {
		for _, c := range nv.Checks {
			if c.Name == verify.CheckSignature && c.OK == (i == broken) {
				t.Errorf("node %d (%s): signature check %v: %s", i, nv.Node, c.OK, c.Detail)
			}
		}
	}

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := &scheduler.VerifyOptions{Progress: func(done, total int) {
		if done == 10 {
			cancel()
		}
	}}
	if _, err := scheduler.VerifyRun(cctx, st, root, runTrusted, opts); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled verification: err %v", err)
	}
}

// VerifyNode gives a node the checks VerifyRun gives it, and the run's
// own checks, without verifying the other nodes: a receipt of another
// node spliced into the record fails its place in the run there too.
func TestVerifyNode(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	_, rec := run(t, st, "pipeline.json", scheduler.Options{Jobs: 3, NoCache: true})
	whole := verifyRun(t, st, recordCID(t, st, rec.Run), runTrusted)
	for _, n := range whole.Nodes {
		v, err := scheduler.VerifyNode(ctx, st, recordCID(t, st, rec.Run), n.Node, verify.NewChainVerifier(st, runTrusted, nil, nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Nodes) != 1 || v.Nodes[0].Node != n.Node || !v.OK() || len(v.Nodes[0].Checks) != len(n.Checks) {
			t.Fatalf("node %s: %d nodes, ok %v, %d checks (VerifyRun: %d)", n.Node, len(v.Nodes), v.OK(), len(v.Nodes[0].Checks), len(n.Checks))
		}
	}
	for i, n := range rec.Nodes {
		if n.Name == "right" {
			for _, o := range rec.Nodes {
				if o.Name == "left" {
					rec.Nodes[i].Receipt, rec.Nodes[i].Acceptance = o.Receipt, o.Acceptance
				}
			}
		}
	}
	forged := storeRecord(t, st, rec)
	v, err := scheduler.VerifyNode(ctx, st, forged, "right", verify.NewChainVerifier(st, runTrusted, nil, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if node, first := v.FirstFailure(); node != "right" || first == nil || first.Name != scheduler.CheckPlace {
		t.Fatalf("left's receipt on right: first failure %s %+v, want right's place in the run", node, first)
	}
	if v, err := scheduler.VerifyNode(ctx, st, forged, "nowhere", verify.NewChainVerifier(st, runTrusted, nil, nil), nil); err != nil || v.OK() {
		t.Fatalf("a node the run does not have: ok %v, %v", v.OK(), err)
	}
}

package scheduler_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
)

// blocksWithin fails the test if st holds a block over the block limit.
func blocksWithin(t *testing.T, st cas.Store) {
	t.Helper()
	err := st.AllKeys(context.Background(), func(c cid.Cid, size int) error {
		if size > cas.MaxBlockSize {
			t.Errorf("block %s holds %d bytes, over the block limit of %d", c, size, cas.MaxBlockSize)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A Work Order whose stored form is over the block limit by its node
// count alone (40,000 nodes, about 5 MB) is stored under an envelope:
// no block is over the limit, it reads back whole, and a walk from the
// run record (gc's, a bundle's) reaches the package trees its nodes
// name.
func TestWorkOrderOverLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("40,000 nodes")
	}
	ctx := context.Background()
	st := memstore.New()
	plan, err := scheduler.Load(writeWorkOrder(t, 40000, "fanout"))
	if err != nil {
		t.Fatal(err)
	}
	s := scheduler.New(scheduler.Options{Store: scheduler.Shared{Store: st}, Key: key})
	id, err := s.Start(ctx, plan, "")
	if err != nil {
		t.Fatal(err)
	}
	blocksWithin(t, st)
	rec, root, err := scheduler.LoadRecord(ctx, st, id)
	if err != nil {
		t.Fatal(err)
	}
	obj, wo, err := scheduler.LoadWorkOrder(ctx, st, rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(obj.Nodes) != 40000 || len(wo.Nodes) != 40000 {
		t.Fatalf("%d nodes read back, want 40000", len(obj.Nodes))
	}
	var env cas.Large
	if data, err := st.Get(ctx, rec.WorkOrder.Cid); err != nil || cas.Unmarshal(data, &env) != nil || env.Type != cas.TypeLarge {
		t.Fatalf("the work order is not under an envelope: %v", err)
	}
	reached := map[cid.Cid]bool{}
	if err := cas.Walk(ctx, st, []cid.Cid{root}, nil, func(c cid.Cid, _ []byte) error {
		reached[c] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if pkg := obj.Nodes[0].Haygent.Cid; !reached[pkg] {
		t.Fatalf("a walk from the run record misses the package tree %s", pkg)
	}
}

// A Work Order with a 6 MB literal input, read by a second node from the
// first node's output: both nodes run and verify, every block fits, and
// a second run of the same order takes both from the memo cache, its
// second node's input built from the first's output read back whole.
func TestWorkOrderLargeInput(t *testing.T) {
	ctx := context.Background()
	echo, err := filepath.Abs("../fixtures/haygents/echo")
	if err != nil {
		t.Fatal(err)
	}
	value := strings.Repeat("a large value ", 6<<20/14)
	data, err := json.Marshal(map[string]any{
		"workorder": "large", "objective": "carry a large value",
		"nodes": map[string]any{
			"big":  map[string]any{"haygent": echo, "input": map[string]any{"value": value}},
			"next": map[string]any{"haygent": echo, "needs": []string{"big"}, "input": map[string]any{"value": map[string]any{"from": "big", "pointer": "/value"}, "trail": []string{"next"}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "large.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	trusted := []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
	for i, ran := range []int{2, 0} {
		plan, err := scheduler.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		s, rec := execute(t, plan, scheduler.Options{Store: scheduler.Shared{Store: st}, Trusted: trusted})
		if rec.Status != scheduler.StatusDone {
			t.Fatalf("run %d: %s: %s", i, rec.Status, rec.Reason)
		}
		if s.Ran() != ran {
			t.Errorf("run %d ran %d nodes, want %d", i, s.Ran(), ran)
		}
		for _, n := range rec.Nodes {
			if n.State != dag.Done {
				t.Fatalf("run %d: node %s is %s: %s", i, n.Name, n.State, n.Reason)
			}
		}
		root, err := st.GetRef(ctx, scheduler.RefNamespace, rec.Run)
		if err != nil {
			t.Fatal(err)
		}
		v, err := scheduler.VerifyRun(ctx, st, root, trusted, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !v.OK() {
			node, c := v.FirstFailure()
			t.Fatalf("run %d does not verify: %s %+v", i, node, c)
		}
	}
	blocksWithin(t, st)
}

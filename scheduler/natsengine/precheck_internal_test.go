package natsengine

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/verify"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
)

// The engine's precheck of a batch of outcomes marks a receipt's
// signature as checked in the scheduler's cache only when the receipt's
// bytes are its CID's and every signature of the batch verifies; and a
// mark decides nothing else: a receipt signed by a key the scheduler
// does not trust still fails its trust check, one with a broken
// signature in the batch leaves every receipt to its own full check, a
// receipt whose bytes are not its CID's, or that is named twice, is not
// marked. Each receipt is then verified by the scheduler's own code, as
// accept does, against the same cache.
func TestPrecheckMarksOnlyWhatHolds(t *testing.T) {
	ctx := context.Background()
	worker := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{11}, ed25519.SeedSize))
	rogue := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize))
	trusted := []ed25519.PublicKey{worker.Public().(ed25519.PublicKey)}

	st := memstore.New()
	pkgRoot, err := cas.PutTree(ctx, st, "../../fixtures/haygents/echo", nil)
	if err != nil {
		t.Fatal(err)
	}
	pkgBlocks := allBlocks(t, st)
	pkg, err := haygent.Load("../../fixtures/haygents/echo")
	if err != nil {
		t.Fatal(err)
	}
	// run makes a receipt signed by key, its blocks stored in st.
	n := 0
	run := func(key ed25519.PrivateKey) scheduler.Outcome {
		t.Helper()
		n++
		local := &scheduler.Local{Key: key, Package: func(scheduler.Invocation) (*haygent.Package, error) { return pkg, nil }}
		out, err := local.Invoke(ctx, scheduler.Invocation{Run: "run-test", Node: fmt.Sprintf("n%d", n), Package: pkgRoot,
			PackageBlocks: pkgBlocks, Input: map[string]any{"value": fmt.Sprint(n), "trail": []any{"seed"}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put(ctx, out.Blocks...); err != nil {
			t.Fatal(err)
		}
		return out
	}
	member := func(out scheduler.Outcome) wireReply {
		return wireReply{Type: TypeReply, ID: newID(), State: StateDone, Worker: "w", Receipt: &cas.Link{Cid: out.Receipt}, Blocks: toWire(out.Blocks)}
	}
	// brokenSignature is out's receipt with a byte of its signature
	// changed: another block, under another CID, in st.
	brokenSignature := func(out scheduler.Outcome) scheduler.Outcome {
		t.Helper()
		data, err := st.Get(ctx, out.Receipt)
		if err != nil {
			t.Fatal(err)
		}
		node, err := cas.DecodeNode(data)
		if err != nil {
			t.Fatal(err)
		}
		m := node.(map[string]any)
		sig := bytes.Clone(m["signature"].([]byte))
		sig[7] ^= 1
		m["signature"] = sig
		enc, err := cas.EncodeNode(m)
		if err != nil {
			t.Fatal(err)
		}
		b := cas.NewBlock(cas.DagCBOR, enc)
		if err := st.Put(ctx, b); err != nil {
			t.Fatal(err)
		}
		return scheduler.Outcome{Receipt: b.CID(), Blocks: append([]cas.Block{b}, out.Blocks...)}
	}

	// precheck runs the engine's precheck of members for invocations
	// waiting with cache's signatures, and reports which receipts it
	// marked.
	precheck := func(cache *verify.Cache, members ...wireReply) map[cid.Cid]bool {
		t.Helper()
		e := &Engine{waiting: map[string]*waiter{}}
		named := map[string]int{}
		for _, m := range members {
			e.waiting[m.ID] = &waiter{sigs: cache.Signatures()}
			named[m.ID]++
		}
		e.precheck(members, named)
		marked := map[cid.Cid]bool{}
		for _, m := range members {
			if cache.Signatures().ReceiptSigned(m.Receipt.Cid) {
				marked[m.Receipt.Cid] = true
			}
		}
		return marked
	}
	verified := func(cache *verify.Cache, c cid.Cid) *verify.Verification {
		t.Helper()
		v, err := verify.VerifyReceiptKnown(ctx, st, c, trusted, nil, cache)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	t.Run("good batch", func(t *testing.T) {
		cache := verify.NewCache()
		a, b := run(worker), run(worker)
		if marked := precheck(cache, member(a), member(b)); !marked[a.Receipt] || !marked[b.Receipt] {
			t.Fatalf("a batch of two good receipts: marked %v", marked)
		}
		for _, out := range []scheduler.Outcome{a, b} {
			if v := verified(cache, out.Receipt); !v.OK() {
				t.Errorf("good receipt %s: %v", out.Receipt, v.FirstFailure())
			}
		}
	})
	t.Run("a broken signature in the batch", func(t *testing.T) {
		cache := verify.NewCache()
		a, b := run(worker), run(worker)
		bad := brokenSignature(run(worker))
		if marked := precheck(cache, member(a), member(bad), member(b)); len(marked) != 0 {
			t.Fatalf("a batch holding a broken signature marked %v", marked)
		}
		if v := verified(cache, bad.Receipt); v.OK() {
			t.Fatal("a receipt with a broken signature verified")
		} else if f := v.FirstFailure(); f.Name != verify.CheckSignature {
			t.Errorf("broken signature: first failure %s: %s, want %s", f.Name, f.Detail, verify.CheckSignature)
		}
		for _, out := range []scheduler.Outcome{a, b} {
			if v := verified(cache, out.Receipt); !v.OK() {
				t.Errorf("good receipt %s beside a broken one: %v", out.Receipt, v.FirstFailure())
			}
		}
	})
	t.Run("a key not trusted", func(t *testing.T) {
		cache := verify.NewCache()
		a, r := run(worker), run(rogue)
		marked := precheck(cache, member(a), member(r))
		if !marked[r.Receipt] {
			t.Fatalf("a valid signature by another key: not marked (%v); the batch should hold", marked)
		}
		v := verified(cache, r.Receipt)
		if v.OK() {
			t.Fatal("a receipt signed by a key the scheduler does not trust verified after a precheck")
		}
		if f := v.FirstFailure(); f.Name != verify.CheckTrust {
			t.Errorf("untrusted signer: first failure %s: %s, want %s", f.Name, f.Detail, verify.CheckTrust)
		}
	})
	t.Run("bytes not the CID's, named twice", func(t *testing.T) {
		cache := verify.NewCache()
		a, b, c := run(worker), run(worker), run(worker)
		// a's receipt CID with b's receipt bytes under it.
		swapped := member(a)
		bData, err := st.Get(ctx, b.Receipt)
		if err != nil {
			t.Fatal(err)
		}
		for i, wb := range swapped.Blocks {
			if bytes.Equal(wb.CID, a.Receipt.Bytes()) {
				swapped.Blocks[i].Data = bData
			}
		}
		twice := member(c)
		marked := precheck(cache, swapped, member(b), twice, twice)
		if marked[a.Receipt] || marked[c.Receipt] {
			t.Fatalf("marked a receipt whose bytes are not its CID's or one named twice: %v", marked)
		}
	})
}

// allBlocks returns every block of st, each checked against its CID.
func allBlocks(t *testing.T, st *memstore.Store) []cas.Block {
	t.Helper()
	ctx := context.Background()
	var blocks []cas.Block
	err := st.AllKeys(ctx, func(c cid.Cid, _ int) error {
		data, err := st.Get(ctx, c)
		if err != nil {
			return err
		}
		b, err := cas.NewBlockWithCID(c, data)
		blocks = append(blocks, b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return blocks
}

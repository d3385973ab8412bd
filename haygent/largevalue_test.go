package haygent_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/replay"
	"github.com/haygent/hg/haygent/verify"
	"github.com/ipfs/go-cid"
)

// largeText returns n characters that no two calls with another seed
// share.
func largeText(seed string, n int) string {
	var sb strings.Builder
	for i := 0; sb.Len() < n; i++ {
		fmt.Fprintf(&sb, "%s %d ", seed, i)
	}
	return sb.String()[:n]
}

// storeWithin fails the test if st holds a block over the block limit,
// and returns the bytes st holds.
func storeWithin(t *testing.T, st cas.Store) int {
	t.Helper()
	total := 0
	err := st.AllKeys(context.Background(), func(c cid.Cid, size int) error {
		if size > cas.MaxBlockSize {
			t.Errorf("block %s holds %d bytes, over the block limit of %d", c, size, cas.MaxBlockSize)
		}
		total += size
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// A Haygent whose input holds a 20 MB string runs, passes, stores no
// block over the limit (nor the value once per state: it is stored
// once), verifies with the value read back in its input and output
// packets, and replays with every transition agreeing.
func TestLargeInput(t *testing.T) {
	st := memstore.New()
	value := largeText("value", 20<<20)
	res := replayRun(t, st, "echo", map[string]any{"value": value, "trail": []any{"small"}}, "", "")
	if res.Receipt.Status != ledger.StatusPass {
		t.Fatalf("status %s: %+v", res.Receipt.Status, res.Receipt.Halt)
	}
	// Seven packets hold the value (the input, three states before and
	// after steps, the output): stored once, with the other blocks.
	if total := storeWithin(t, st); total > len(value)+(1<<20) {
		t.Errorf("the store holds %d bytes for a value of %d", total, len(value))
	}
	v := verifyOf(t, st, res.ReceiptCID, []ed25519.PublicKey{replayKey.Public().(ed25519.PublicKey)})
	if !v.OK() {
		t.Fatalf("verification failed: %+v", v.FirstFailure())
	}
	if v.Input == nil || v.Input.Payload["value"] != value {
		t.Fatal("the verified input packet does not hold the value")
	}
	if v.Output == nil || v.Output.Payload["value"] != value {
		t.Fatal("the verified output packet does not hold the value")
	}
	mustAgree(t, st, res.ReceiptCID, 4, replay.Options{})
}

// A value stored out of line that is missing or damaged fails the
// canonical-form check, naming it; the input packet is then not handed
// out.
func TestLargeInputDamaged(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	value := largeText("value", 6<<20)
	res := replayRun(t, st, "echo", map[string]any{"value": value}, "", "")
	var in ledger.Packet
	loadObject(t, st, res.Receipt.Input.Cid, &in)
	file, ok := cas.LinkOf(in.Payload["value"])
	if !ok {
		t.Fatalf("the input packet holds %T, not a link", in.Payload["value"])
	}
	node, err := cas.LoadFileNode(ctx, st, file)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, node.Links[2].Cid); err != nil {
		t.Fatal(err)
	}
	v := verifyOf(t, st, res.ReceiptCID, []ed25519.PublicKey{replayKey.Public().(ed25519.PublicKey)})
	wantFailed(t, v, verify.CheckBlocks, node.Links[2].Cid.String(), "missing")
	wantFailed(t, v, verify.CheckCanonical, "outlined value "+file.String())
	if v.Input != nil {
		t.Error("an input packet whose value cannot be read was handed out")
	}
	if _, err := replay.Run(ctx, st, res.ReceiptCID, replay.Options{}); !errors.Is(err, replay.ErrIncomplete) {
		t.Errorf("replay: %v, want ErrIncomplete", err)
	}
}

// An input the block limit cannot hold even with its values stored apart
// (its keys alone are over it) is refused before anything runs, naming
// the limit; so is an input holding a link, which a reader would take
// for a value stored apart.
func TestLargeInputRefused(t *testing.T) {
	pkg, err := haygent.Load(fixtures + "/haygents/echo")
	if err != nil {
		t.Fatal(err)
	}
	run := func(input map[string]any) error {
		_, err := haygent.Run(context.Background(), pkg, input, haygent.Options{Store: memstore.New(), Key: replayKey})
		return err
	}
	keys := map[string]any{"value": "v"}
	for i := range 300000 {
		keys[fmt.Sprintf("key-%07d", i)] = int64(i)
	}
	err = run(keys)
	if !errors.Is(err, cas.ErrTooLarge) || !strings.HasPrefix(err.Error(), "input: packet of ") ||
		!strings.Contains(err.Error(), fmt.Sprintf("the block limit of %d bytes", cas.MaxBlockSize)) {
		t.Errorf("300,000 keys: %v; want the input refused, naming its size and the limit", err)
	}
	err = run(map[string]any{"value": cas.Sum(cas.Raw, []byte("x"))})
	if !errors.Is(err, cas.ErrInvalid) || !strings.HasPrefix(err.Error(), "input: holds a link") {
		t.Errorf("a link: %v; want the input refused", err)
	}
}

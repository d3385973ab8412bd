package natsengine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/scheduler"
	"github.com/haygent/hg/scheduler/natsengine"
	"github.com/nats-io/nats.go/jetstream"
)

// result is what one Invoke returned.
type result struct {
	out scheduler.Outcome
	err error
}

// An engine reads a batched reply member by member and trusts none of
// it: in a batch that mixes good and bad members, a good outcome is
// handed to its invocation; an invocation named twice, one with a
// tampered block and one with a state a batch may not carry are each
// refused; an outcome for an invocation that is not the engine's changes
// nothing; an invocation the batch leaves out keeps waiting. A batch of
// more than [natsengine.MaxBatchOutcomes] members is refused, each of its
// invocations told so. A batch that does not decode strictly hands
// nothing to anyone, and its invocations are still answered by the
// next good reply; an outcome sent again for an invocation already
// answered is dropped.
func TestBatchedOutcomesHostile(t *testing.T) {
	url := startServer(t)
	e := newEngine(t, url, natsengine.Options{Timeout: 90 * time.Second, MaxBatch: 1}) // one message an invocation, for the hand-made worker below
	js, err := jetstream.New(connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The hand-made worker's own consumer on the work queue.
	work, err := js.CreateConsumer(ctx, "HG_WORK", jetstream.ConsumerConfig{FilterSubject: "hg.work.*", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}

	const n = 7
	inv := echoInvocation(t)
	results := make([]chan result, n)
	for i := range n {
		results[i] = make(chan result, 1)
		one := inv
		one.Node = fmt.Sprintf("n%d", i)
		go func() {
			out, err := e.Invoke(ctx, one)
			results[i] <- result{out, err}
		}()
	}
	// Take the n requests and run each, as a worker would.
	pkg, err := haygent.Load("../../fixtures/haygents/echo")
	if err != nil {
		t.Fatal(err)
	}
	local := &scheduler.Local{Key: workerKeys[0], Package: func(scheduler.Invocation) (*haygent.Package, error) { return pkg, nil }}
	ids := make([]string, n)
	outs := make([]scheduler.Outcome, n)
	var prefix string // the engine's result subjects
	for range n {
		msg, err := work.Next(jetstream.FetchContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		_ = msg.Ack()
		req, err := natsengine.DecodeRequest(msg.Data())
		if err != nil {
			t.Fatal(err)
		}
		if !req.Batched {
			t.Fatalf("the engine's request %s does not say it reads batched outcomes", req.ID)
		}
		var i int
		if _, err := fmt.Sscanf(req.Invocation.Node, "n%d", &i); err != nil || i < 0 || i >= n || ids[i] != "" {
			t.Fatalf("request for node %q", req.Invocation.Node)
		}
		ids[i] = req.ID
		prefix = strings.TrimSuffix(req.Reply, req.ID)
		one := req.Invocation
		one.PackageBlocks = inv.PackageBlocks
		if outs[i], err = local.Invoke(ctx, one); err != nil {
			t.Fatal(err)
		}
	}
	worker := "ed25519:" + strings.Repeat("a", 43) // information only
	done := func(id string, out scheduler.Outcome) map[string]any {
		var blocks []any
		for _, b := range out.Blocks {
			blocks = append(blocks, map[string]any{"cid": b.CID().Bytes(), "data": b.Data()})
		}
		return map[string]any{"type": natsengine.TypeReply, "id": id, "state": natsengine.StateDone, "worker": worker,
			"receipt": cas.Link{Cid: out.Receipt}, "blocks": blocks}
	}
	publish := func(members []any, extra map[string]any) {
		t.Helper()
		body := map[string]any{"type": natsengine.TypeOutcomes, "outcomes": members}
		for k, v := range extra {
			body[k] = v
		}
		token := "batch-" + fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64())
		if _, err := js.Publish(ctx, prefix+token, mustMarshal(t, body)); err != nil {
			t.Fatal(err)
		}
	}
	stranger := fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64()) // no invocation of this engine

	// n0 good; n1 twice; a stranger; n2 with a tampered block; n3
	// "started"; n4, n5, n6 left out.
	tampered := done(ids[2], outs[2])
	bl := tampered["blocks"].([]any)
	for _, b := range bl {
		m := b.(map[string]any)
		if d := m["data"].([]byte); len(d) > 8 {
			d = bytes.Clone(d)
			d[len(d)/2] ^= 1
			m["data"] = d
			break
		}
	}
	started := map[string]any{"type": natsengine.TypeReply, "id": ids[3], "state": natsengine.StateStarted, "worker": worker}
	publish([]any{done(ids[0], outs[0]), done(ids[1], outs[1]), done(stranger, outs[0]), tampered, started, done(ids[1], outs[1])}, nil)

	good := func(i int) {
		t.Helper()
		r := <-results[i]
		if r.err != nil {
			t.Fatalf("n%d: %v, want its outcome", i, r.err)
		}
		if r.out.Receipt != outs[i].Receipt {
			t.Fatalf("n%d: receipt %s, want %s", i, r.out.Receipt, outs[i].Receipt)
		}
		checkOutcome(t, r.out, workerKeys[0])
	}
	refused := func(i int, says string) {
		t.Helper()
		r := <-results[i]
		if !errors.Is(r.err, natsengine.ErrRefused) || !strings.Contains(r.err.Error(), says) {
			t.Fatalf("n%d: outcome %v, error %v; want refused saying %q", i, r.out.Receipt, r.err, says)
		}
	}
	good(0)
	refused(1, "named 2 times")
	refused(2, "block")
	refused(3, `state "started"`)
	for _, i := range []int{4, 5, 6} {
		select {
		case r := <-results[i]:
			t.Fatalf("n%d, not in the batch, returned: %v %v", i, r.out.Receipt, r.err)
		default:
		}
	}

	// Too many members: n5 among strangers.
	over := []any{done(ids[5], outs[5])}
	for range natsengine.MaxBatchOutcomes {
		over = append(over, done(fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64()), outs[0]))
	}
	publish(over, nil)
	refused(5, "more than")

	// Not strictly decodable (a field the format does not have): n6 is
	// handed nothing, and waits.
	publish([]any{done(ids[6], outs[6])}, map[string]any{"extra": "x"})
	// A good batch: n4 and n6, and n0 again (already answered: dropped).
	publish([]any{done(ids[4], outs[4]), done(ids[0], outs[0]), done(ids[6], outs[6])}, nil)
	good(4)
	good(6)
}

// An engine's request is of version 3, which says it reads batched
// outcomes; a worker still takes version 2 (an engine that reads only
// single replies, to be answered reply by reply) and refuses other
// versions by name.
func TestRequestVersions(t *testing.T) {
	inv := echoInvocation(t)
	id := strings.Repeat("ab", 16)
	req := &natsengine.Request{ID: id, Reply: "hg.result." + strings.Repeat("cd", 16) + "." + id, Deadline: time.Now().Add(time.Minute), Invocation: inv}
	data, err := natsengine.EncodeRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(natsengine.TypeRequest)) || natsengine.TypeRequest != "hg/nats-invocation@3" {
		t.Fatalf("the request is not of type %s", natsengine.TypeRequest)
	}
	got, err := natsengine.DecodeRequest(data)
	if err != nil || !got.Batched {
		t.Fatalf("version 3: %v, batched %v; want batched", err, got != nil && got.Batched)
	}
	for _, c := range []struct {
		typ     string
		batched bool
		refused bool
	}{{natsengine.TypeRequestV2, false, false}, {"hg/nats-invocation@1", false, true}, {"hg/nats-invocation@4", false, true}} {
		other := bytes.Replace(data, []byte(natsengine.TypeRequest), []byte(c.typ), 1)
		got, err := natsengine.DecodeRequest(other)
		if c.refused {
			if !errors.Is(err, natsengine.ErrRefused) || !strings.Contains(err.Error(), natsengine.TypeRequest) || !strings.Contains(err.Error(), natsengine.TypeRequestV2) {
				t.Errorf("%s: %v, want refused naming the versions taken", c.typ, err)
			}
			continue
		}
		if err != nil || got.Batched != c.batched {
			t.Errorf("%s: %v, batched %v; want taken, batched %v", c.typ, err, got != nil && got.Batched, c.batched)
		}
	}
}

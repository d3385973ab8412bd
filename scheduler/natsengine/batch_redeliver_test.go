package natsengine_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/haygent/hg/scheduler/natsengine"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A batch handed out again (its first worker died with it) runs no more
// as a batch: the worker that gets it queues each member again as a
// message of its own and acks the batch, so that a member that brings
// workers down is handed out, and fails, alone. Every member then runs
// exactly once, and its engine gets exactly one outcome for it.
func TestBatchHandedOutAgainSplit(t *testing.T) {
	url := startServer(t)
	nc := connect(t, url)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, s := range []jetstream.StreamConfig{
		{Name: "HG_WORK", Subjects: []string{"hg.work.>"}, Retention: jetstream.WorkQueuePolicy, Duplicates: 10 * time.Minute},
		{Name: "HG_RESULTS", Subjects: []string{"hg.result.>"}, Retention: jetstream.WorkQueuePolicy},
	} {
		if _, err := js.CreateStream(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// The first "worker": the workers' consumer as Serve makes it, which
	// takes the batch and dies with it.
	cons, err := js.CreateOrUpdateConsumer(ctx, "HG_WORK", jetstream.ConsumerConfig{
		Durable: "hg-workers", FilterSubject: "hg.work.*", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: time.Second, MaxDeliver: 5,
	})
	if err != nil {
		t.Fatal(err)
	}
	engine := hex32()
	results, err := js.CreateConsumer(ctx, "HG_RESULTS", jetstream.ConsumerConfig{FilterSubject: "hg.result." + engine + ".>", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}

	const n = 3
	inv := echoInvocation(t)
	ids := map[string]bool{}
	var members []any
	for i := range n {
		id := hex32()
		ids[id] = true
		one := inv
		one.Node = fmt.Sprintf("n%d", i)
		data, err := natsengine.EncodeRequest(&natsengine.Request{ID: id, Reply: "hg.result." + engine + "." + id,
			Deadline: time.Now().Add(time.Minute), Invocation: one, Inline: true})
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, cbor.RawMessage(data))
	}
	batch := mustMarshal(t, map[string]any{"type": natsengine.TypeInvocations, "invocations": members})
	if _, err := js.Publish(ctx, "hg.work.batch-"+hex32(), batch); err != nil {
		t.Fatal(err)
	}
	first, err := cons.Next(jetstream.FetchContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.Subject(), "hg.work.batch-") {
		t.Fatalf("took %s, want the batch", first.Subject())
	}
	_ = first.Nak() // died with it: handed out again

	var mu sync.Mutex
	took, queuedAgain := map[string]int{}, map[string]int{}
	startWorker(t, url, natsengine.WorkerOptions{Key: workerKeys[0], Jobs: 4, AckWait: time.Second, MaxDeliver: 5,
		Events: func(ev natsengine.WorkerEvent) {
			t.Logf("worker: %s", ev)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case ev.Event == natsengine.EventTook:
				took[ev.ID]++
			case ev.Event == natsengine.EventHandedBack && strings.Contains(ev.Error, "message of its own"):
				queuedAgain[ev.ID]++
			}
		}})

	outcomes := map[string]int{}
	for len(outcomes) < n {
		m, err := results.Next(jetstream.FetchContext(ctx))
		if err != nil {
			t.Fatalf("outcomes %v: %v", outcomes, err)
		}
		_ = m.Ack()
		id := m.Subject()[strings.LastIndexByte(m.Subject(), '.')+1:]
		if strings.HasPrefix(id, "batch-") {
			var b struct {
				Outcomes []struct {
					ID    string `cbor:"id"`
					State string `cbor:"state"`
				} `cbor:"outcomes"`
			}
			if err := cbor.Unmarshal(m.Data(), &b); err != nil {
				t.Fatal(err)
			}
			for _, o := range b.Outcomes {
				outcomes[o.ID]++
				if o.State != natsengine.StateDone {
					t.Errorf("outcome of %s: %s", o.ID, o.State)
				}
			}
			continue
		}
		outcomes[id]++
	}
	// Give a second outcome, were there one, time to come.
	extra, err := results.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range extra.Messages() {
		t.Errorf("an outcome more: %s", m.Subject())
	}
	mu.Lock()
	defer mu.Unlock()
	for id := range ids {
		if outcomes[id] != 1 || took[id] != 1 || queuedAgain[id] != 1 {
			t.Errorf("invocation %s: %d outcomes, taken %d times, queued again %d times; want 1 of each", id, outcomes[id], took[id], queuedAgain[id])
		}
	}
	stream, err := js.Stream(ctx, "HG_WORK")
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Errorf("work queue holds %d messages, want none", info.State.Msgs)
	}
}

// An invocation queued again on its own (by a worker that split its
// batch) that the workers' consumer gives up on fails at its engine, as
// one the engine published would: the engine finds it by its subject,
// not by a sequence it never saw.
func TestQueuedAgainMaxDeliver(t *testing.T) {
	url := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	js, _ := jetstream.New(connect(t, url))
	// The work stream with a short duplicate window, made before the
	// engine (which uses it as it is): the copy below reuses the
	// invocation's id as its message id, as a split does.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "HG_WORK", Subjects: []string{"hg.work.>"},
		Retention: jetstream.WorkQueuePolicy, Duplicates: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, url, natsengine.Options{Timeout: 50 * time.Second, MaxBatch: 1})
	cons, err := js.CreateOrUpdateConsumer(ctx, "HG_WORK", jetstream.ConsumerConfig{
		Durable: "hg-workers", FilterSubject: "hg.work.*", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 300 * time.Millisecond, MaxDeliver: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, 1)
	go func() {
		_, err := e.Invoke(ctx, echoInvocation(t))
		failed <- err
	}()
	// The engine's message: taken and acked, as a worker that split it
	// would, its body queued again under another message id.
	msg, err := cons.Next(jetstream.FetchContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if err := msg.DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	id := msg.Subject()[len("hg.work."):]
	again := nats.NewMsg(msg.Subject())
	again.Data = msg.Data()
	again.Header.Set("Hg-Queued-Again", "1")
	for {
		ack, err := js.PublishMsg(ctx, again, jetstream.WithMsgID(id))
		if err != nil {
			t.Fatal(err)
		}
		if !ack.Duplicate {
			break
		}
		time.Sleep(50 * time.Millisecond) // until the duplicate window has passed
	}
	// Taken and never answered, until the consumer gives up on it.
	go func() {
		for ctx.Err() == nil {
			_, _ = cons.Next(jetstream.FetchContext(ctx))
		}
	}()
	select {
	case err := <-failed:
		if err == nil || !strings.Contains(err.Error(), "MaxDeliver") {
			t.Fatalf("Invoke: %v, want a MaxDeliver failure", err)
		}
	case <-ctx.Done():
		t.Fatal("the invocation queued again was given up on by the consumer and still waits at its engine")
	}
}

// An engine answers the want question only on a requester's inbox: a
// question naming another reply subject (one of the engine's result
// subjects, a JetStream API subject) would have it publish there under
// its own permissions, and goes unanswered. The answer names only ids
// the engine waits for, and it waits for none here.
func TestWantAnswersOnlyInbox(t *testing.T) {
	url := startServer(t)
	e := newEngine(t, url, natsengine.Options{})
	nc := connect(t, url)
	ask := mustMarshal(t, map[string]any{"type": natsengine.TypeWant, "ids": []any{hex32()}})
	subject := "hg.want." + e.ID()

	for _, reply := range []string{"hg.result." + e.ID() + "." + hex32(), "$JS.API.STREAM.DELETE.HG_WORK"} {
		sub, err := nc.SubscribeSync(reply)
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.PublishRequest(subject, reply, ask); err != nil {
			t.Fatal(err)
		}
		// The inbox question after it is answered: by then the engine has
		// read this one too (one subscription, in order).
		m, err := nc.Request(subject, ask, 10*time.Second)
		if err != nil {
			t.Fatalf("a question from an inbox: %v", err)
		}
		var a struct {
			Type string   `cbor:"type"`
			IDs  []string `cbor:"ids"`
		}
		if err := cbor.Unmarshal(m.Data, &a); err != nil || a.Type != natsengine.TypeWant || len(a.IDs) != 0 {
			t.Fatalf("answer %+v (%v), want %s naming no id", a, err, natsengine.TypeWant)
		}
		if got, err := sub.NextMsg(500 * time.Millisecond); err == nil {
			t.Errorf("the engine answered on %s: %q", got.Subject, got.Data)
		}
		_ = sub.Unsubscribe()
	}
	js, _ := jetstream.New(nc)
	if _, err := js.Stream(context.Background(), "HG_WORK"); err != nil {
		t.Errorf("work stream: %v", err)
	}
}

// A heartbeat for several invocations is held to the same rules as one
// for one: decoded strictly (its type, at most MaxBatchInvocations ids,
// each an id, a worker key, no other field), information only. A good
// one tells the engine who took its invocation, so that a timeout names
// that worker; an odd one is dropped; none gives an outcome.
func TestForgedBatchHeartbeats(t *testing.T) {
	url := startServer(t)
	var mu sync.Mutex
	var logged []string
	e, err := natsengine.New(connect(t, url), natsengine.Options{
		Timeout: 5 * time.Second, Silence: time.Hour, NoWorkerAfter: time.Hour, MaxBatch: 1,
		Log: func(format string, args ...any) {
			mu.Lock()
			logged = append(logged, fmt.Sprintf(format, args...))
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	nc := connect(t, url)
	queued, err := nc.SubscribeSync("hg.work.*")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.Invoke(context.Background(), echoInvocation(t))
		done <- err
	}()
	m, err := queued.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	id := m.Subject[len("hg.work."):]
	forger := "ed25519:" + strings.Repeat("A", 43)
	many := make([]any, natsengine.MaxBatchInvocations+1)
	for i := range many {
		many[i] = id
	}
	odd := [][]byte{
		[]byte("not cbor"),
		mustMarshal(t, map[string]any{"type": natsengine.TypeHeartbeats, "ids": many, "worker": forger}),
		mustMarshal(t, map[string]any{"type": natsengine.TypeHeartbeats, "ids": []any{id, "NOT-AN-ID"}, "worker": forger}),
		mustMarshal(t, map[string]any{"type": natsengine.TypeHeartbeats, "ids": []any{id}, "worker": "ed25519:nope"}),
		mustMarshal(t, map[string]any{"type": natsengine.TypeHeartbeats, "ids": []any{id}, "worker": forger, "done": true}),
		mustMarshal(t, map[string]any{"type": natsengine.TypeHeartbeat, "ids": []any{id}, "worker": forger}),
	}
	good := mustMarshal(t, map[string]any{"type": natsengine.TypeHeartbeats, "ids": []any{hex32(), id}, "worker": forger})
	for _, b := range append(odd, good) {
		if err := nc.Publish("hg.beat."+e.ID()+".batch-"+hex32(), b); err != nil {
			t.Fatal(err)
		}
	}
	_ = nc.Flush()
	err = <-done
	if err == nil {
		t.Fatal("Invoke returned an outcome from heartbeats alone")
	}
	if !strings.Contains(err.Error(), "took it but sent no outcome") || !strings.Contains(err.Error(), forger) {
		t.Errorf("Invoke: %v, want a timeout naming the worker of the batch heartbeat", err)
	}
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, l := range logged {
		if strings.Contains(l, "heartbeat") {
			n++
		}
	}
	if n != len(odd) {
		t.Errorf("%d heartbeats dropped, want %d (the odd ones): %q", n, len(odd), logged)
	}
}

// A split that can queue only some members of a batch handed out again
// runs the rest itself: each member runs once, whichever way it went,
// and its engine gets one outcome for it.
func TestPartialSplitRunsRest(t *testing.T) {
	url := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	inv := echoInvocation(t)
	engine := hex32()
	var members [][]byte
	var ids []string
	for i := range 3 {
		id := hex32()
		ids = append(ids, id)
		members = append(members, member(t, inv, engine, id, "", fmt.Sprintf("m%d", i)))
	}
	deliverTwice(ctx, t, url, batchBody(t, natsengine.TypeInvocations, members...))
	js, _ := jetstream.New(connect(t, url))
	// The work stream full after one message more: the split's second
	// publish fails, as any publish may (a timeout, a leader election).
	st, err := js.Stream(ctx, "HG_WORK")
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxMsgs, cfg.Discard = 2, jetstream.DiscardNew
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	res := newResultReader(ctx, t, js, engine)
	log := startLoggedWorker(ctx, t, url, natsengine.WorkerOptions{Key: workerKeys[0], Jobs: 2})
	log.waitFor(ctx, "every member done", func() bool { return len(log.of(natsengine.EventDone, "*")) >= len(ids) })
	waitQueueEmpty(ctx, t, js)
	if len(log.of(natsengine.EventHandedBack, "*")) == 0 {
		t.Fatal("no member was queued again on its own: the split was not tried")
	}
	took := map[string]int{}
	for _, ev := range log.of(natsengine.EventTook, "*") {
		took[ev.ID]++
	}
	outs := map[string]int{}
	for _, r := range res.drain(ctx, t) {
		outs[r.ID]++
	}
	for _, id := range ids {
		if took[id] != 1 || outs[id] != 1 {
			t.Errorf("member %s taken %d times, %d outcomes; want 1 and 1", id, took[id], outs[id])
		}
	}
}

// A worker that heard an engine give up on an invocation does not start
// it when it takes it later, in a batch whose other member is still
// wanted (the message stays on the queue for that one): it says it
// stopped it, and runs the other.
func TestCancelledMemberNotStarted(t *testing.T) {
	url := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	newEngine(t, url, natsengine.Options{}) // the streams
	js, _ := jetstream.New(connect(t, url))
	inv := echoInvocation(t)
	engine, gone, wanted := hex32(), hex32(), hex32()
	res := newResultReader(ctx, t, js, engine)
	log := startLoggedWorker(ctx, t, url, natsengine.WorkerOptions{Key: workerKeys[0], Jobs: 2})
	nc := connect(t, url)
	if err := nc.Publish("hg.cancel."+gone, nil); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the worker hears it: a core message, no event of its own
	body := batchBody(t, natsengine.TypeInvocations, member(t, inv, engine, gone, "", "gone"), member(t, inv, engine, wanted, "", "wanted"))
	if _, err := js.Publish(ctx, "hg.work.batch-"+hex32(), body); err != nil {
		t.Fatal(err)
	}
	log.waitFor(ctx, "the wanted member done", func() bool { return len(log.of(natsengine.EventDone, wanted)) == 1 })
	waitQueueEmpty(ctx, t, js)
	if n := len(log.of(natsengine.EventTook, gone)); n != 0 {
		t.Errorf("the invocation given up on was taken %d times", n)
	}
	if len(log.of(natsengine.EventStopped, gone)) != 1 {
		t.Errorf("no stopped event for the invocation given up on")
	}
	for _, r := range res.drain(ctx, t) {
		if r.ID == gone {
			t.Errorf("an outcome for the invocation given up on: %+v", r)
		}
	}
}

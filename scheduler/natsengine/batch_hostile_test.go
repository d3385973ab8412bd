package natsengine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/scheduler"
	"github.com/haygent/hg/scheduler/natsengine"
	"github.com/ipfs/go-cid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Batched work messages as a hostile publisher on the work subjects
// sends them, and as an engine sends them: what a worker runs of them,
// what it answers, what it asks the engines, and how many it runs at
// once.

// hex32 is a new random invocation or engine id.
func hex32() string { return fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64()) }

// fixtureInvocation is an invocation of the fixture Haygent in dir, its
// package blocks with it.
func fixtureInvocation(t *testing.T, dir string, input map[string]any) scheduler.Invocation {
	t.Helper()
	ms := memstore.New()
	ctx := context.Background()
	root, err := cas.PutTree(ctx, ms, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []cas.Block
	err = ms.AllKeys(ctx, func(c cid.Cid, _ int) error {
		data, err := ms.Get(ctx, c)
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
	return scheduler.Invocation{Run: "run-test", Node: "n", Package: root, PackageBlocks: blocks, Input: input}
}

// member is the request body of invocation id of the fake engine
// engine, its package inline, its reply subject reply ("" for the
// right one).
func member(t *testing.T, inv scheduler.Invocation, engine, id, reply, node string) []byte {
	t.Helper()
	if reply == "" {
		reply = "hg.result." + engine + "." + id
	}
	inv.Node = node
	data, err := natsengine.EncodeRequest(&natsengine.Request{ID: id, Reply: reply, Deadline: time.Now().Add(2 * time.Minute), Invocation: inv, Inline: true})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// batchBody is a batched work message of the given members, canonical.
func batchBody(t *testing.T, typ string, members ...[]byte) []byte {
	t.Helper()
	raw := make([]cbor.RawMessage, len(members))
	for i, m := range members {
		raw[i] = m
	}
	return mustMarshal(t, &struct {
		Type        string            `cbor:"type"`
		Invocations []cbor.RawMessage `cbor:"invocations"`
	}{typ, raw})
}

// eventLog collects a worker's events.
type eventLog struct {
	t   *testing.T
	mu  sync.Mutex
	all []natsengine.WorkerEvent
	ch  chan struct{}
}

func newEventLog(t *testing.T) *eventLog { return &eventLog{t: t, ch: make(chan struct{}, 1)} }

func (l *eventLog) add(ev natsengine.WorkerEvent) {
	l.t.Logf("worker: %s", ev)
	l.mu.Lock()
	l.all = append(l.all, ev)
	l.mu.Unlock()
	select {
	case l.ch <- struct{}{}:
	default:
	}
}

// of returns the events of kind, about id if id is not "*".
func (l *eventLog) of(kind, id string) []natsengine.WorkerEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []natsengine.WorkerEvent
	for _, ev := range l.all {
		if ev.Event == kind && (id == "*" || ev.ID == id) {
			out = append(out, ev)
		}
	}
	return out
}

// waitFor waits until cond holds, or fails the test when ctx ends.
func (l *eventLog) waitFor(ctx context.Context, what string, cond func() bool) {
	l.t.Helper()
	for !cond() {
		select {
		case <-l.ch:
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			l.t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}

// startLoggedWorker starts a worker whose events go to a new log, and
// waits until it serves.
func startLoggedWorker(ctx context.Context, t *testing.T, url string, o natsengine.WorkerOptions) *eventLog {
	t.Helper()
	l := newEventLog(t)
	o.Events = l.add
	startWorker(t, url, o)
	l.waitFor(ctx, "the worker to connect", func() bool { return len(l.of(natsengine.EventConnected, "*")) > 0 })
	return l
}

// waitQueueEmpty waits until the work stream holds no message.
func waitQueueEmpty(ctx context.Context, t *testing.T, js jetstream.JetStream) {
	t.Helper()
	stream, err := js.Stream(ctx, "HG_WORK")
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the work queue still holds %d messages", info.State.Msgs)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// reply is one reply a worker sent, from a single or a batched message.
type reply struct {
	ID, State, Error string
}

// resultReader reads every reply to a fake engine.
type resultReader struct {
	cons jetstream.Consumer
}

func newResultReader(ctx context.Context, t *testing.T, js jetstream.JetStream, engine string) *resultReader {
	t.Helper()
	cons, err := js.CreateConsumer(ctx, "HG_RESULTS", jetstream.ConsumerConfig{FilterSubject: "hg.result." + engine + ".>", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	return &resultReader{cons}
}

// drain returns the replies stored so far, single ones and the members
// of batched ones.
func (r *resultReader) drain(ctx context.Context, t *testing.T) []reply {
	t.Helper()
	var out []reply
	add := func(m map[string]any) {
		s := func(k string) string { v, _ := m[k].(string); return v }
		out = append(out, reply{ID: s("id"), State: s("state"), Error: s("error")})
	}
	for {
		info, err := r.cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumPending == 0 && info.NumAckPending == 0 {
			return out
		}
		msg, err := r.cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		if err := msg.DoubleAck(ctx); err != nil { // so that the next Info counts it
			t.Fatal(err)
		}
		n, err := cas.DecodeNode(msg.Data())
		if err != nil {
			t.Fatalf("reply on %s: %v", msg.Subject(), err)
		}
		m := n.(map[string]any)
		if m["type"] == natsengine.TypeOutcomes {
			for _, o := range m["outcomes"].([]any) {
				add(o.(map[string]any))
			}
			continue
		}
		add(m)
	}
}

// A batched work message that is not one as a whole (it does not decode
// strictly, is of another type, holds no member or more than
// MaxBatchInvocations) is refused and terminated: the worker runs none
// of it, answers none of it, and it does not come back.
func TestBatchHostileWholeRefused(t *testing.T) {
	url := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := startLoggedWorker(ctx, t, url, natsengine.WorkerOptions{Key: workerKeys[0], Jobs: 4})
	nc := connect(t, url)
	js, _ := jetstream.New(nc)
	results, err := nc.SubscribeSync("hg.result.>")
	if err != nil {
		t.Fatal(err)
	}
	inv := echoInvocation(t)
	engine := hex32()
	good := func() []byte { return member(t, inv, engine, hex32(), "", "seed") }

	var tooMany [][]byte
	for range natsengine.MaxBatchInvocations + 1 {
		tooMany = append(tooMany, good())
	}
	nonCanonical, err := cbor.Marshal(&struct { // keys in the wrong order
		Invocations []cbor.RawMessage `cbor:"invocations"`
		Type        string            `cbor:"type"`
	}{[]cbor.RawMessage{good()}, natsengine.TypeInvocations})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		body []byte
	}{
		{"not cbor", []byte(`{"type":"hg/nats-invocations@1","invocations":[]}`)},
		{"non-canonical", nonCanonical},
		{"extra field", mustMarshal(t, map[string]any{"type": natsengine.TypeInvocations, "invocations": []any{}, "extra": 1})},
		{"a field missing", mustMarshal(t, map[string]any{"type": natsengine.TypeInvocations})},
		{"wrong type", batchBody(t, natsengine.TypeRequest, good())},
		{"single request", good()},
		{"empty", batchBody(t, natsengine.TypeInvocations)},
		{"too many", batchBody(t, natsengine.TypeInvocations, tooMany...)},
	}
	for _, c := range cases {
		if _, err := js.Publish(ctx, "hg.work.batch-"+hex32(), c.body); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	log.waitFor(ctx, "a refusal of every message", func() bool {
		n := 0
		for _, ev := range log.of(natsengine.EventRefused, "*") {
			if ev.ID == "" {
				n++
			}
		}
		return n >= len(cases)
	})
	waitQueueEmpty(ctx, t, js)
	if got := log.of(natsengine.EventTook, "*"); len(got) > 0 {
		t.Errorf("the worker ran members of refused batches: %v", got)
	}
	if got := log.of(natsengine.EventRefused, "*"); len(got) != len(cases) {
		t.Errorf("%d refusals, want %d (one a message, none a member): %v", len(got), len(cases), got)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := results.Pending(); n > 0 {
		m, _ := results.NextMsg(time.Second)
		t.Errorf("the worker answered %d times for refused batches (first on %s)", n, m.Subject)
	}
	// Terminated: the consumer has nothing left to hand out again.
	c, err := js.Consumer(ctx, "HG_WORK", "hg-workers")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := c.Info(ctx); err != nil || info.NumPending != 0 || info.NumAckPending != 0 || info.NumRedelivered != 0 {
		t.Errorf("consumer after the refusals: %+v %v", info, err)
	}
}

// A batch mixing a good member with hostile ones: the good one runs
// once and its engine gets exactly one outcome for it; a second member
// with its id is refused and not run; a member whose reply subject is
// not its result subject is refused and answered nowhere; a member with
// a tampered package block is answered with an error; a member that is
// no request at all is refused. The message is then gone.
func TestBatchHostileMembers(t *testing.T) {
	url := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := startLoggedWorker(ctx, t, url, natsengine.WorkerOptions{Key: workerKeys[0], Jobs: 3})
	nc := connect(t, url)
	js, _ := jetstream.New(nc)
	engine := hex32()
	reader := newResultReader(ctx, t, js, engine)
	others, err := nc.SubscribeSync("hg.result.>") // every reply, to any engine
	if err != nil {
		t.Fatal(err)
	}
	inv := echoInvocation(t)
	good, badReply, tamperedID, other := hex32(), hex32(), hex32(), hex32()
	tampered := tamper(t, member(t, inv, engine, tamperedID, "", "tampered"), inv)
	body := batchBody(t, natsengine.TypeInvocations,
		member(t, inv, engine, good, "", "good"),
		member(t, inv, engine, good, "", "again"),                                   // the good one's id again
		member(t, inv, engine, badReply, "hg.result."+engine+"."+other, "badreply"), // another invocation's result subject
		member(t, inv, engine, hex32(), "hg.work."+hex32(), "worksubject"),          // not a result subject at all
		tampered,
		mustMarshal(t, "not a request"),
	)
	if _, err := js.Publish(ctx, "hg.work.batch-"+hex32(), body); err != nil {
		t.Fatal(err)
	}
	waitQueueEmpty(ctx, t, js)

	if got := log.of(natsengine.EventTook, "*"); len(got) != 1 || got[0].ID != good || got[0].Node != "good" {
		t.Errorf("took %v, want the good member alone, once", got)
	}
	if got := log.of(natsengine.EventDone, good); len(got) != 1 {
		t.Errorf("done %v, want one for the good member", got)
	}
	for _, id := range []string{good, badReply, tamperedID} {
		if got := log.of(natsengine.EventRefused, id); len(got) != 1 {
			t.Errorf("refusals of %s: %v, want one", id, got)
		}
	}
	if got := log.of(natsengine.EventRefused, "*"); len(got) != 5 {
		t.Errorf("%d refusals, want 5 (again, badreply, worksubject, tampered, not a request): %v", len(got), got)
	}
	replies := reader.drain(ctx, t)
	byID := map[string][]reply{}
	for _, r := range replies {
		byID[r.ID] = append(byID[r.ID], r)
	}
	var final []reply
	for _, r := range byID[good] {
		if r.State == natsengine.StateDone || r.State == natsengine.StateError {
			final = append(final, r)
		}
	}
	if len(final) != 1 || final[0].State != natsengine.StateDone {
		t.Errorf("the good member's outcomes: %+v, want exactly one, done", byID[good])
	}
	if got := byID[tamperedID]; len(got) != 1 || got[0].State != natsengine.StateError || !strings.Contains(got[0].Error, "refused") {
		t.Errorf("the tampered member's replies: %+v, want one refusal (error)", got)
	}
	for id, rs := range byID {
		if id != good && id != tamperedID {
			t.Errorf("a reply for %s, which the batch named on a bad subject or not at all: %+v", id, rs)
		}
	}
	// Nothing went to any other subject either (the results stream takes
	// every result subject).
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := others.NextMsg(100 * time.Millisecond)
		if err != nil {
			break
		}
		if !strings.HasPrefix(m.Subject, "hg.result."+engine+"."+good) && !strings.HasPrefix(m.Subject, "hg.result."+engine+"."+tamperedID) && !strings.HasPrefix(m.Subject, "hg.result."+engine+".batch-") {
			t.Errorf("a reply on %s", m.Subject)
		}
	}
}

// wantEngine plays an engine's side of the want question on
// hg.want.ENGINE: it records each question and answers it with answer
// (nil: asked, never answered).
type wantEngine struct {
	mu    sync.Mutex
	asked [][]string
}

func (w *wantEngine) serve(t *testing.T, nc *nats.Conn, engine string, answer func(ids []string) []string) {
	t.Helper()
	sub, err := nc.Subscribe("hg.want."+engine, func(m *nats.Msg) {
		n, err := cas.DecodeNode(m.Data)
		if err != nil {
			t.Errorf("question: %v", err)
			return
		}
		q := n.(map[string]any)
		var ids []string
		for _, id := range q["ids"].([]any) {
			ids = append(ids, id.(string))
		}
		w.mu.Lock()
		w.asked = append(w.asked, ids)
		w.mu.Unlock()
		if q["type"] != natsengine.TypeWant {
			t.Errorf("question of type %v", q["type"])
		}
		if answer == nil {
			return
		}
		out := answer(ids)
		if out == nil {
			out = []string{}
		}
		_ = m.Respond(mustMarshal(t, map[string]any{"type": natsengine.TypeWant, "ids": out}))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// deliverTwice publishes body on a batch subject and has it handed out
// once, and handed back, before any worker serves: a worker then gets
// it for the second time.
func deliverTwice(ctx context.Context, t *testing.T, url string, body []byte) {
	t.Helper()
	newEngine(t, url, natsengine.Options{}) // the streams
	js, _ := jetstream.New(connect(t, url))
	// The workers' consumer as Serve makes it by default.
	cons, err := js.CreateOrUpdateConsumer(ctx, "HG_WORK", jetstream.ConsumerConfig{
		Durable: "hg-workers", FilterSubject: "hg.work.*", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 15 * time.Second, MaxDeliver: 3,
		Description: "hg: the workers, each invocation to one of them",
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "hg.work.batch-"+hex32(), body); err != nil {
		t.Fatal(err)
	}
	msg, err := cons.Next(jetstream.FetchContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if err := msg.Nak(); err != nil {
		t.Fatal(err)
	}
}

// A batch handed out again runs only the members its engine still
// waits for: the worker asks the engine about every member, and one the
// engine says it has the outcome of is skipped, never taken.
func TestWantSkipsAnswered(t *testing.T) {
	url := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	inv := echoInvocation(t)
	engine, answered, open := hex32(), hex32(), hex32()
	var eng wantEngine
	eng.serve(t, connect(t, url), engine, func(ids []string) []string {
		var out []string
		for _, id := range ids {
			if id != answered {
				out = append(out, id)
			}
		}
		return out
	})
	deliverTwice(ctx, t, url, batchBody(t, natsengine.TypeInvocations,
		member(t, inv, engine, answered, "", "answered"), member(t, inv, engine, open, "", "open")))
	log := startLoggedWorker(ctx, t, url, natsengine.WorkerOptions{Key: workerKeys[0], Jobs: 2})
	js, _ := jetstream.New(connect(t, url))
	waitQueueEmpty(ctx, t, js)

	if got := log.of(natsengine.EventTook, "*"); len(got) != 1 || got[0].ID != open {
		t.Errorf("took %v, want the open member alone", got)
	}
	if got := log.of(natsengine.EventSkipped, "*"); len(got) != 1 || got[0].ID != answered {
		t.Errorf("skipped %v, want the answered member", got)
	}
	eng.mu.Lock()
	defer eng.mu.Unlock()
	if len(eng.asked) != 1 || len(eng.asked[0]) != 2 {
		t.Fatalf("questions %v, want one naming both members", eng.asked)
	}
}

// An engine that does not answer the question (none listens on its want
// subject, or one listens and says nothing) gets every member run.
func TestWantNoAnswerRunsAll(t *testing.T) {
	for _, tc := range []struct {
		name   string
		listen bool
	}{{"no engine", false}, {"silent engine", true}} {
		t.Run(tc.name, func(t *testing.T) {
			url := startServer(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			inv := echoInvocation(t)
			engine, a, b := hex32(), hex32(), hex32()
			var eng wantEngine
			if tc.listen {
				eng.serve(t, connect(t, url), engine, nil)
			}
			deliverTwice(ctx, t, url, batchBody(t, natsengine.TypeInvocations,
				member(t, inv, engine, a, "", "a"), member(t, inv, engine, b, "", "b")))
			log := startLoggedWorker(ctx, t, url, natsengine.WorkerOptions{Key: workerKeys[0], Jobs: 2})
			js, _ := jetstream.New(connect(t, url))
			waitQueueEmpty(ctx, t, js)
			took := map[string]int{}
			for _, ev := range log.of(natsengine.EventTook, "*") {
				took[ev.ID]++
			}
			if len(took) != 2 || took[a] != 1 || took[b] != 1 {
				t.Errorf("took %v, want each member once", took)
			}
			if got := log.of(natsengine.EventSkipped, "*"); len(got) > 0 {
				t.Errorf("skipped %v", got)
			}
			if tc.listen {
				// One for the batch handed out again, one for each member
				// it queued again on its own.
				eng.mu.Lock()
				if len(eng.asked) != 3 {
					t.Errorf("questions %v, want three", eng.asked)
				}
				eng.mu.Unlock()
			}
		})
	}
}

// An engine answers the want question with the ids it still waits for
// and no other: not one it never issued, not one it gave up on. A
// question that does not decode strictly gets no answer.
func TestWantEngineAnswers(t *testing.T) {
	url := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e := newEngine(t, url, natsengine.Options{Timeout: time.Minute, NoWorkerAfter: time.Hour})
	nc := connect(t, url)
	work, err := nc.SubscribeSync("hg.work.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ictx, icancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := e.Invoke(ictx, echoInvocation(t))
		done <- err
	}()
	m, err := work.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	req, err := natsengine.DecodeRequest(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	ask := func(body []byte, wait time.Duration) ([]string, error) {
		t.Helper()
		a, err := nc.Request("hg.want."+e.ID(), body, wait)
		if err != nil {
			return nil, err
		}
		n, err := cas.DecodeNode(a.Data)
		if err != nil {
			t.Fatalf("answer: %v", err)
		}
		am := n.(map[string]any)
		if am["type"] != natsengine.TypeWant {
			t.Fatalf("answer of type %v", am["type"])
		}
		var ids []string
		for _, id := range am["ids"].([]any) {
			ids = append(ids, id.(string))
		}
		return ids, nil
	}
	question := func(ids ...string) []byte {
		return mustMarshal(t, map[string]any{"type": natsengine.TypeWant, "ids": ids})
	}
	stranger := hex32()
	got, err := ask(question(stranger, req.ID, stranger), 30*time.Second)
	if err != nil || len(got) != 1 || got[0] != req.ID {
		t.Errorf("answer %v %v, want only %s (waiting), not the stranger %s", got, err, req.ID, stranger)
	}
	var tooMany []string
	for range natsengine.MaxBatchInvocations + 1 {
		tooMany = append(tooMany, req.ID)
	}
	for name, body := range map[string][]byte{
		"not cbor":    []byte("hello"),
		"wrong type":  mustMarshal(t, map[string]any{"type": natsengine.TypeReply, "ids": []string{req.ID}}),
		"bad id":      question(req.ID, "ZZ"),
		"too many":    question(tooMany...),
		"extra field": mustMarshal(t, map[string]any{"type": natsengine.TypeWant, "ids": []string{req.ID}, "all": true}),
	} {
		if got, err := ask(body, time.Second); !errors.Is(err, nats.ErrTimeout) {
			t.Errorf("%s: answered %v (%v), want no answer", name, got, err)
		}
	}
	icancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Invoke: %v", err)
	}
	got, err = ask(question(req.ID), 30*time.Second)
	if err != nil || len(got) != 0 {
		t.Errorf("after giving up: %v %v, want an empty answer", got, err)
	}
}

// blockingAdapter answers every slot after it held it until another
// slot is held at once (or a while went by), counting how many it holds
// at once.
type blockingAdapter struct {
	mu      sync.Mutex
	cond    *sync.Cond
	active  int
	max     int
	calls   int
	pairing bool
}

func newBlockingAdapter() *blockingAdapter {
	a := &blockingAdapter{}
	a.cond = sync.NewCond(&a.mu)
	return a
}

func (a *blockingAdapter) Name() string  { return "blocking" }
func (a *blockingAdapter) Model() string { return "" }
func (a *blockingAdapter) Propose(ctx context.Context, _ haygent.SlotRequest) ([]byte, error) {
	a.mu.Lock()
	a.active++
	a.calls++
	a.max = max(a.max, a.active)
	a.cond.Broadcast()
	// Hold the slot until another is held at once: a worker that ran
	// more than its jobs at once shows it here. A member alone (the last
	// one) goes on after a while.
	limit := time.Now().Add(10 * time.Second)
	stop := context.AfterFunc(ctx, func() { a.mu.Lock(); a.cond.Broadcast(); a.mu.Unlock() })
	timer := time.AfterFunc(time.Until(limit), func() { a.mu.Lock(); a.cond.Broadcast(); a.mu.Unlock() })
	for a.active < 2 && !a.pairing && time.Now().Before(limit) && ctx.Err() == nil {
		a.cond.Wait()
	}
	if a.active >= 2 {
		a.pairing = true // let the pair go together
	}
	a.active--
	if a.active == 0 {
		a.pairing = false
	}
	a.mu.Unlock()
	stop()
	timer.Stop()
	return []byte(`{"summary": "ok"}`), nil
}

// A worker of two jobs handed a batch of six members never runs more
// than two of them at once, by its events and by its adapter, and runs
// them all.
func TestBatchJobsBound(t *testing.T) {
	url := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	adapter := newBlockingAdapter()
	var running, most atomic.Int32
	log := newEventLog(t)
	events := func(ev natsengine.WorkerEvent) {
		switch ev.Event {
		case natsengine.EventTook:
			n := running.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
		case natsengine.EventDone, natsengine.EventFailed, natsengine.EventStopped, natsengine.EventHandedBack:
			running.Add(-1)
		}
		log.add(ev)
	}
	startWorker(t, url, natsengine.WorkerOptions{Key: workerKeys[0], Jobs: 2, Adapter: adapter, Events: events})
	log.waitFor(ctx, "the worker to connect", func() bool { return len(log.of(natsengine.EventConnected, "*")) > 0 })
	nc := connect(t, url)
	js, _ := jetstream.New(nc)
	inv := fixtureInvocation(t, "../../fixtures/haygents/claimer", map[string]any{"task": "x"})
	engine := hex32()
	var members [][]byte
	for i := range 6 {
		members = append(members, member(t, inv, engine, hex32(), "", fmt.Sprintf("m%d", i)))
	}
	if _, err := js.Publish(ctx, "hg.work.batch-"+hex32(), batchBody(t, natsengine.TypeInvocations, members...)); err != nil {
		t.Fatal(err)
	}
	waitQueueEmpty(ctx, t, js)
	if got := len(log.of(natsengine.EventTook, "*")); got != 6 {
		t.Errorf("took %d members, want 6", got)
	}
	if m := most.Load(); m > 2 {
		t.Errorf("%d members ran at once by the events, want at most 2", m)
	}
	adapter.mu.Lock()
	defer adapter.mu.Unlock()
	t.Logf("adapter: %d calls, at most %d at once", adapter.calls, adapter.max)
	if adapter.calls < 6 {
		t.Errorf("the adapter was asked %d times, want at least 6", adapter.calls)
	}
	if adapter.max > 2 {
		t.Errorf("%d slots held at once, want at most 2", adapter.max)
	}
	if adapter.max < 2 {
		t.Errorf("never 2 slots at once: the worker ran the batch one member at a time")
	}
}

// workWatch records every work message an engine publishes.
type workWatch struct {
	sub *nats.Subscription
}

func watchWork(t *testing.T, nc *nats.Conn) *workWatch {
	t.Helper()
	sub, err := nc.SubscribeSync("hg.work.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &workWatch{sub}
}

// workMsg is one work message: its subject and the requests in it.
type workMsg struct {
	subject string
	batch   bool
	reqs    []*natsengine.Request
}

var batchSubject = regexp.MustCompile(`^hg\.work\.batch-[0-9a-f]{32}$`)

// next returns the next work message, decoded and checked as a worker
// would.
func (w *workWatch) next(t *testing.T, wait time.Duration) (workMsg, bool) {
	t.Helper()
	m, err := w.sub.NextMsg(wait)
	if err != nil {
		return workMsg{}, false
	}
	out := workMsg{subject: m.Subject}
	if strings.HasPrefix(m.Subject, "hg.work.batch-") {
		out.batch = true
		if !batchSubject.MatchString(m.Subject) {
			t.Errorf("batch subject %s", m.Subject)
		}
		var body struct {
			Type        string            `cbor:"type"`
			Invocations []cbor.RawMessage `cbor:"invocations"`
		}
		if err := cas.Unmarshal(m.Data, &body); err != nil || body.Type != natsengine.TypeInvocations {
			t.Fatalf("batch on %s: %v, type %q", m.Subject, err, body.Type)
		}
		if len(body.Invocations) < 2 || len(body.Invocations) > natsengine.MaxBatchInvocations {
			t.Errorf("a batch of %d invocations", len(body.Invocations))
		}
		for _, raw := range body.Invocations {
			req, err := natsengine.DecodeRequest(raw)
			if err != nil {
				t.Fatalf("member of %s: %v", m.Subject, err)
			}
			out.reqs = append(out.reqs, req)
		}
		return out, true
	}
	req, err := natsengine.DecodeRequest(m.Data)
	if err != nil {
		t.Fatalf("message on %s: %v", m.Subject, err)
	}
	if m.Subject != "hg.work."+req.ID {
		t.Errorf("invocation %s on %s", req.ID, m.Subject)
	}
	out.reqs = []*natsengine.Request{req}
	return out, true
}

// invokeAll runs n invocations at once, each with its own node name and
// ctx, and returns their errors by node once all returned.
func invokeAll(ctx context.Context, e *natsengine.Engine, inv scheduler.Invocation, n int, ctxs map[string]context.Context) map[string]chan error {
	out := map[string]chan error{}
	for i := range n {
		one := inv
		one.Node = fmt.Sprintf("n%d", i)
		c := ctx
		if ctxs != nil && ctxs[one.Node] != nil {
			c = ctxs[one.Node]
		}
		ch := make(chan error, 1)
		out[one.Node] = ch
		go func() {
			_, err := e.Invoke(c, one)
			ch <- err
		}()
	}
	return out
}

// With MaxBatch 1 every work message holds one invocation, on the
// subject of its id, however many are asked for at once.
func TestDispatchMaxBatchOne(t *testing.T) {
	url := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	startWorker(t, url, natsengine.WorkerOptions{Key: workerKeys[0], Jobs: 4})
	e := newEngine(t, url, natsengine.Options{Timeout: time.Minute, MaxBatch: 1})
	w := watchWork(t, connect(t, url))
	const n = 12
	for node, ch := range invokeAll(ctx, e, echoInvocation(t), n, nil) {
		if err := <-ch; err != nil {
			t.Errorf("%s: %v", node, err)
		}
	}
	ids := map[string]bool{}
	for {
		m, ok := w.next(t, time.Second)
		if !ok {
			break
		}
		if m.batch || len(m.reqs) != 1 {
			t.Errorf("with MaxBatch 1, a message on %s of %d invocations", m.subject, len(m.reqs))
		}
		for _, r := range m.reqs {
			if ids[r.ID] {
				t.Errorf("invocation %s published twice", r.ID)
			}
			ids[r.ID] = true
		}
	}
	if len(ids) != n {
		t.Errorf("%d invocations published, want %d", len(ids), n)
	}
}

// With the default MaxBatch, invocations asked for at once go together:
// at least one batched message appears, every invocation is in exactly
// one message, and every one is answered.
func TestDispatchBatches(t *testing.T) {
	url := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	startWorker(t, url, natsengine.WorkerOptions{Key: workerKeys[0], Jobs: 4})
	e := newEngine(t, url, natsengine.Options{Timeout: time.Minute})
	w := watchWork(t, connect(t, url))
	const n = 16
	batches := 0
	for round := 0; round < 5 && batches == 0; round++ {
		for node, ch := range invokeAll(ctx, e, echoInvocation(t), n, nil) {
			if err := <-ch; err != nil {
				t.Errorf("%s: %v", node, err)
			}
		}
		ids := map[string]bool{}
		for {
			m, ok := w.next(t, time.Second)
			if !ok {
				break
			}
			if m.batch {
				batches++
			}
			for _, r := range m.reqs {
				if ids[r.ID] {
					t.Errorf("invocation %s published twice", r.ID)
				}
				ids[r.ID] = true
			}
		}
		if len(ids) != n {
			t.Errorf("round %d: %d invocations published, want %d", round, len(ids), n)
		}
	}
	if batches == 0 {
		t.Errorf("%d invocations at once, five times, never went together", n)
	}
}

// An invocation given up on (its ctx cancelled) while another of its
// batched message is still open does not take the message off the
// queue: the other is still carried out once a worker comes.
func TestDispatchAbandonKeepsBatch(t *testing.T) {
	url := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	e := newEngine(t, url, natsengine.Options{Timeout: 60 * time.Second, NoWorkerAfter: time.Hour})
	w := watchWork(t, connect(t, url))
	const n = 12
	var (
		victim string
		rest   map[string]chan error
		rounds []map[string]context.CancelFunc
	)
	for round := 0; round < 5 && victim == ""; round++ {
		ctxs, cancels := map[string]context.Context{}, map[string]context.CancelFunc{}
		for i := range n {
			ctxs[fmt.Sprintf("n%d", i)], cancels[fmt.Sprintf("n%d", i)] = context.WithCancel(ctx)
		}
		rounds = append(rounds, cancels)
		inv := echoInvocation(t)
		inv.Run = fmt.Sprintf("round-%d", round)
		errs := invokeAll(ctx, e, inv, n, ctxs)
		seen := 0
		var batch []string
		for seen < n {
			m, ok := w.next(t, 30*time.Second)
			if !ok {
				t.Fatalf("round %d: %d of %d invocations published", round, seen, n)
			}
			seen += len(m.reqs)
			if m.batch && batch == nil {
				for _, r := range m.reqs {
					batch = append(batch, r.Invocation.Node)
				}
			}
		}
		if batch == nil {
			for _, c := range cancels {
				c()
			}
			for _, ch := range errs {
				<-ch
			}
			continue
		}
		victim = batch[0]
		cancels[victim]()
		if err := <-errs[victim]; !errors.Is(err, context.Canceled) {
			t.Fatalf("the abandoned invocation: %v", err)
		}
		delete(errs, victim)
		rest = errs
		t.Logf("abandoned %s of the batch %v", victim, batch)
	}
	if victim == "" {
		t.Fatal("no batched message in five rounds")
	}
	startWorker(t, url, natsengine.WorkerOptions{Key: workerKeys[0], Jobs: 4})
	for node, ch := range rest {
		if err := <-ch; err != nil {
			t.Errorf("%s, in the abandoned one's round: %v", node, err)
		}
	}
	for _, cancels := range rounds {
		for _, c := range cancels {
			c()
		}
	}
}

// An invocation whose ctx ended before its message was published is
// not published: Invoke returned an error for it, and no one waits for
// its outcome. (The engine already has the package's blocks, so Invoke
// goes straight to the queue.)
func TestDispatchCancelledNotPublished(t *testing.T) {
	url := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	log := startLoggedWorker(ctx, t, url, natsengine.WorkerOptions{Key: workerKeys[0], Jobs: 1})
	e := newEngine(t, url, natsengine.Options{Timeout: time.Minute})
	w := watchWork(t, connect(t, url))
	inv := echoInvocation(t)
	inv.Node = "first"
	if _, err := e.Invoke(ctx, inv); err != nil { // the package's blocks go to the bucket
		t.Fatal(err)
	}
	gone, stop := context.WithCancel(ctx)
	stop()
	inv.Node = "cancelled"
	if _, err := e.Invoke(gone, inv); !errors.Is(err, context.Canceled) {
		t.Fatalf("Invoke with an ended ctx: %v", err)
	}
	// The engine publishes in order: once this one is answered, the
	// cancelled one was published before it, if at all.
	inv.Node = "after"
	if _, err := e.Invoke(ctx, inv); err != nil {
		t.Fatal(err)
	}
	for {
		m, ok := w.next(t, time.Second)
		if !ok {
			break
		}
		for _, r := range m.reqs {
			if r.Invocation.Node == "cancelled" {
				t.Errorf("the invocation given up on before it was published was published (%s on %s)", r.ID, m.subject)
			}
		}
	}
	for _, ev := range log.of(natsengine.EventTook, "*") {
		if ev.Node == "cancelled" {
			t.Errorf("a worker ran the invocation given up on before it was published: %s", ev)
		}
	}
}

// A batch handed out again whose members name several engines that do
// not answer the want question (each is waited for in turn) is still
// run once per member: the worker keeps the message while it asks,
// instead of letting its ack wait run out so that the message is handed
// out once more, and its members run twice.
func TestWantSilentEnginesRunOnce(t *testing.T) {
	url := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	inv := echoInvocation(t)
	var members [][]byte
	ids := map[string]bool{}
	nc := connect(t, url)
	engines := make([]*wantEngine, 3)
	for i := range engines {
		engine, id := hex32(), hex32()
		engines[i] = &wantEngine{}
		engines[i].serve(t, nc, engine, nil) // listens, never answers
		members = append(members, member(t, inv, engine, id, "", fmt.Sprintf("m%d", i)))
		ids[id] = true
	}
	deliverTwice(ctx, t, url, batchBody(t, natsengine.TypeInvocations, members...))
	log := startLoggedWorker(ctx, t, url, natsengine.WorkerOptions{Key: workerKeys[0], Jobs: 2, AckWait: 3 * time.Second})
	js, _ := jetstream.New(connect(t, url))
	waitQueueEmpty(ctx, t, js)
	// The batch handed out twice in all (the hand-made delivery and the
	// worker's, which queues each member again on its own), and each
	// member once on its own.
	c, err := js.Consumer(ctx, "HG_WORK", "hg-workers")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := c.Info(ctx); err != nil || info.Delivered.Consumer != uint64(2+len(members)) {
		t.Errorf("%d messages handed out (%v), want %d: the batch twice and each member once; its ack wait ran out while the worker asked", info.Delivered.Consumer, err, 2+len(members))
	}
	// Each engine asked twice: for the batch handed out again, and for
	// its member queued again on its own.
	for i, eng := range engines {
		eng.mu.Lock()
		if len(eng.asked) != 2 {
			t.Errorf("engine %d asked %d times, want twice", i, len(eng.asked))
		}
		eng.mu.Unlock()
	}
	took := map[string]int{}
	for _, ev := range log.of(natsengine.EventTook, "*") {
		took[ev.ID]++
	}
	for id := range ids {
		if took[id] != 1 {
			t.Errorf("member %s taken %d times, want once", id, took[id])
		}
	}
}

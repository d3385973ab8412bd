package natsengine

import (
	"context"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// handleBatch carries out a batched work message ([TypeInvocations]):
// each member judged alone and run in a job slot of its own (the message
// came with one, the others wait for theirs before the worker takes
// another message), and the message acked once every member is settled,
// or handed back if any could not be answered.
func (w *worker) handleBatch(ctx context.Context, msg jetstream.Msg, slots *jobSlots) {
	members, err := decodeInvocations(msg.Data())
	if err != nil {
		slots.put()
		w.event(WorkerEvent{Event: EventRefused, Error: err.Error()})
		_ = msg.TermWithReason("refused")
		return
	}
	reqs := make([]*Request, 0, len(members))
	raws := make(map[string][]byte, len(members)) // the bodies of reqs, by id
	seen := make(map[string]bool, len(members))
	for _, raw := range members {
		if req := w.judge(ctx, msg, raw, "", seen); req != nil {
			reqs = append(reqs, req)
			raws[req.ID] = raw
		}
	}
	beats := w.newBeats()
	stop := keepAlive(msg, beatPeriod(w.o.AckWait), beats.beat)
	reqs = w.stillWanted(ctx, msg, reqs)
	if len(reqs) > 1 {
		// Those queued again on their own are handed off; should some
		// not be, the batch runs what is left.
		if reqs = w.split(ctx, msg, reqs, raws); len(reqs) == 0 {
			stop()
			slots.put()
			if err := msg.Ack(); err != nil {
				w.event(WorkerEvent{Event: EventError, Error: "ack: " + err.Error()})
			}
			return
		}
	}
	// The engines hear at once who took their invocations: one heartbeat
	// for all of an engine's members of the message.
	for _, req := range reqs {
		beats.add(req)
	}
	beats.beat()
	results := make([]settlement, len(reqs))
	if len(reqs) > 1 {
		slots.expect(len(reqs) - 1) // every member after the first asks for a slot below
	}
	var wg sync.WaitGroup
	for i, req := range reqs {
		if i > 0 && !slots.take(ctx, true) {
			w.event(WorkerEvent{Event: EventHandedBack, ID: req.ID, Run: req.Invocation.Run, Node: req.Invocation.Node, Error: "the worker is stopping"})
			beats.remove(req)
			results[i] = handBack
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer slots.put()
			defer beats.remove(req)
			results[i], _ = w.run(ctx, msg, req)
		}()
	}
	if len(reqs) == 0 {
		slots.put() // the one the message came with
	}
	wg.Wait()
	stop()
	s := answered
	for _, r := range results {
		switch {
		case r == handBack:
			s = handBack
		case r == retry && s != handBack:
			s = retry
		}
	}
	if err := settleMsg(msg, s, ""); err != nil && s == answered {
		w.event(WorkerEvent{Event: EventError, Error: "ack: " + err.Error()})
	}
}

// mayHaveMissed reports whether msg may hold an invocation its engine
// has the outcome of, or gave up on, that this worker cannot know of, so
// that its engines are asked (stillWanted): msg was handed out before, or
// is a member queued again on its own. A batch's invocations given up on
// while others keep the message on the queue are skipped by a worker that
// heard their cancels ([cancelledSet]); a scheduler gives up on all of a
// run's invocations together, and the message of those goes whole.
func mayHaveMissed(msg jetstream.Msg, meta *jetstream.MsgMetadata) bool {
	return meta.NumDelivered > 1 || msg.Headers().Get(queuedAgainHeader) != ""
}

// stillWanted returns those of reqs that their engines still wait for,
// when msg may hold one that is not (mayHaveMissed; see [TypeWant]): one
// whose
// outcome its engine has is not run again. An engine that does not
// answer gets all of its invocations run.
func (w *worker) stillWanted(ctx context.Context, msg jetstream.Msg, reqs []*Request) []*Request {
	meta, err := msg.Metadata()
	if err != nil || len(reqs) == 0 || !mayHaveMissed(msg, meta) {
		return reqs
	}
	byEngine := map[string][]string{}
	for _, r := range reqs {
		e := engineOf(w.o.resultPrefix(), r.Reply)
		byEngine[e] = append(byEngine[e], r.ID)
	}
	// Each engine asked at once: a batch naming several waits for the
	// slowest, not for their sum.
	wanted := map[string]map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for e, ids := range byEngine {
		wg.Go(func() {
			still := w.wanted(ctx, w.o.wantSubject(e), ids)
			mu.Lock()
			wanted[e] = still
			mu.Unlock()
		})
	}
	wg.Wait()
	out := reqs[:0:0]
	for _, r := range reqs {
		if still := wanted[engineOf(w.o.resultPrefix(), r.Reply)]; still != nil && !still[r.ID] {
			w.event(WorkerEvent{Event: EventSkipped, ID: r.ID, Run: r.Invocation.Run, Node: r.Invocation.Node, Error: "its engine has its outcome already"})
			continue
		}
		out = append(out, r)
	}
	return out
}

// queuedAgainHeader marks a member of a batch queued again on its own
// (split): a worker that takes it asks its engine whether it still waits
// for it, as for a message handed out again. A forged one costs a
// question.
const queuedAgainHeader = "Hg-Queued-Again"

// split puts each of reqs (raws holds their bodies) back on the queue as
// a message of its own when msg was handed out before, and returns those
// it could not (all of them if msg was not handed out before): the
// caller runs what is left, and acks msg. A batch handed out again may
// hold an invocation that brought its worker down; alone, it is handed
// out, and fails at the consumer's MaxDeliver, alone, not taking its
// batch with it. The message id of each is its invocation id, so a split
// made twice within the stream's duplicate window queues each once.
func (w *worker) split(ctx context.Context, msg jetstream.Msg, reqs []*Request, raws map[string][]byte) []*Request {
	meta, err := msg.Metadata()
	if err != nil || meta.NumDelivered <= 1 {
		return reqs
	}
	for i, r := range reqs {
		m := nats.NewMsg(w.o.workSubject(r.ID))
		m.Data = raws[r.ID]
		m.Header.Set(queuedAgainHeader, "1")
		pctx, cancel := context.WithTimeout(ctx, replyAttempt)
		_, err := w.js.PublishMsg(pctx, m, jetstream.WithMsgID(r.ID), jetstream.WithExpectStream(w.o.Stream))
		cancel()
		if err != nil {
			w.event(WorkerEvent{Event: EventError, ID: r.ID, Run: r.Invocation.Run, Node: r.Invocation.Node, Error: "split: " + err.Error()})
			return reqs[i:]
		}
		w.event(WorkerEvent{Event: EventHandedBack, ID: r.ID, Run: r.Invocation.Run, Node: r.Invocation.Node, Error: "its batch was handed out again: queued again as a message of its own"})
	}
	return nil
}

// engineOf returns the ENGINE token of a reply subject PREFIX.result.ENGINE.ID
// that validReply accepted.
func engineOf(resultPrefix, reply string) string {
	engine, _, _ := strings.Cut(strings.TrimPrefix(reply, resultPrefix), ".")
	return engine
}

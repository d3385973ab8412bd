package natsengine

import (
	"context"
	"fmt"
	"strings"
	"sync"

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
	seen := make(map[string]bool, len(members))
	for _, raw := range members {
		req, err := DecodeRequest(raw)
		switch {
		case req != nil && seen[req.ID]:
			w.event(WorkerEvent{Event: EventRefused, ID: req.ID, Error: "named twice in one batch"})
			continue
		case req != nil && !w.validReply(req.ID, req.Reply):
			w.event(WorkerEvent{Event: EventRefused, ID: req.ID, Error: fmt.Sprintf("reply subject %q is not a result subject", req.Reply)})
			continue
		case err != nil:
			if req != nil {
				seen[req.ID] = true
			}
			w.refuse(ctx, msg, req, err)
			continue
		}
		seen[req.ID] = true
		reqs = append(reqs, req)
	}
	reqs = w.stillWanted(ctx, msg, reqs)

	var beats beatSet
	stop := keepAlive(msg, beatPeriod(w.o.AckWait), beats.beat)
	results := make([]settlement, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		if i > 0 && !slots.take(ctx, true) {
			w.event(WorkerEvent{Event: EventHandedBack, ID: req.ID, Run: req.Invocation.Run, Node: req.Invocation.Node, Error: "the worker is stopping"})
			results[i] = handBack
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer slots.put()
			results[i], _ = w.run(ctx, msg, req, &beats)
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

// stillWanted returns those of reqs that their engines still wait for,
// when msg was handed out before (see [TypeWant]): an invocation whose
// outcome its engine has is not run again. An engine that does not
// answer gets all of its invocations run.
func (w *worker) stillWanted(ctx context.Context, msg jetstream.Msg, reqs []*Request) []*Request {
	meta, err := msg.Metadata()
	if err != nil || meta.NumDelivered <= 1 || len(reqs) == 0 {
		return reqs
	}
	byEngine := map[string][]string{}
	for _, r := range reqs {
		e := engineOf(w.o.resultPrefix(), r.Reply)
		byEngine[e] = append(byEngine[e], r.ID)
	}
	wanted := map[string]map[string]bool{}
	for e, ids := range byEngine {
		wanted[e] = w.wanted(ctx, w.o.wantSubject(e), ids)
	}
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

// engineOf returns the ENGINE token of a reply subject PREFIX.result.ENGINE.ID
// that validReply accepted.
func engineOf(resultPrefix, reply string) string {
	engine, _, _ := strings.Cut(strings.TrimPrefix(reply, resultPrefix), ".")
	return engine
}

// beatSet is the heartbeats of the invocations a message's worker runs,
// sent together at each of the message's beats.
type beatSet struct {
	mu    sync.Mutex
	next  int
	beats map[int]func()
}

// add adds a heartbeat and returns the func that removes it.
func (b *beatSet) add(beat func()) func() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.beats == nil {
		b.beats = map[int]func(){}
	}
	k := b.next
	b.next++
	b.beats[k] = beat
	return func() {
		b.mu.Lock()
		delete(b.beats, k)
		b.mu.Unlock()
	}
}

// beat sends every heartbeat in the set.
func (b *beatSet) beat() {
	b.mu.Lock()
	beats := make([]func(), 0, len(b.beats))
	for _, f := range b.beats {
		beats = append(beats, f)
	}
	b.mu.Unlock()
	for _, f := range beats {
		f()
	}
}

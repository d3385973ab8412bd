package natsengine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/haygent/hg/cas"
)

// Batched invocations: the invocations an engine is asked for while it
// publishes one go together, as one message,
//
//	{"type": "hg/nats-invocations@1", "invocations": [requests, each
//	 exactly a "hg/nats-invocation@3" body]}
//
// on the subject PREFIX.work.batch-TOKEN (TOKEN 32 hex digits, also its
// message id, so a retried publish is queued once). The server then
// stores, hands out and removes one message instead of one an
// invocation. An engine alone, or one whose invocations come one at a
// time, sends each as before, on its own subject; no invocation waits
// for one that is not there yet. [Options.MaxBatch] bounds a batch
// (default [MaxBatchInvocations]; 1 sends every invocation alone).
//
// A worker trusts no member. It decodes the whole message strictly (one
// that does not decode, or holds more than [MaxBatchInvocations] members,
// is refused and terminated, and runs nothing), then judges each member
// as it would a message of its own: one that does not decode, names a
// reply subject that is not its own, or repeats an id of the batch is
// refused (answered with an error if it decoded); the others run, each
// in a job slot of its own. The worker acks the message once every
// member is settled, and hands it back if any member could not be
// answered. A batch handed out again (its worker died, or handed it
// back) first asks each engine which of its members it still waits for
// ([wantSubject]) and runs only those: a member answered before is not
// run again.

// TypeInvocations is several invocations in one message, engine to
// worker (see [MaxBatchInvocations]).
const TypeInvocations = "hg/nats-invocations@1"

// MaxBatchInvocations bounds the invocations in one batched message: an
// engine sends at most that many together, and a worker refuses a batch
// of more.
const MaxBatchInvocations = 16

// wireInvocations is the body of a batched work message.
type wireInvocations struct {
	Type        string            `cbor:"type"`
	Invocations []cbor.RawMessage `cbor:"invocations"`
}

// decodeInvocations decodes a batched work message strictly: its members
// are left to [DecodeRequest], one at a time.
func decodeInvocations(data []byte) ([]cbor.RawMessage, error) {
	var w wireInvocations
	if err := cas.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRefused, err)
	}
	if w.Type != TypeInvocations {
		return nil, fmt.Errorf("%w: type %q, want %q", ErrRefused, w.Type, TypeInvocations)
	}
	if len(w.Invocations) == 0 {
		return nil, fmt.Errorf("%w: a batch of no invocations", ErrRefused)
	}
	if len(w.Invocations) > MaxBatchInvocations {
		return nil, fmt.Errorf("%w: a batch of %d invocations, more than %d", ErrRefused, len(w.Invocations), MaxBatchInvocations)
	}
	return w.Invocations, nil
}

// sent is a work message an engine published: the invocations in it,
// and how many of them are still open (neither answered nor given up
// on). Guarded by the engine's mu.
type sent struct {
	seq  uint64
	ids  []string
	open int
}

// queuedInvocation is one invocation waiting to be published.
type queuedInvocation struct {
	id       string
	data     []byte // its request body
	deadline time.Time
	done     chan placed
	// Under the dispatcher's mu: its Invoke gave up before it was
	// published (the dispatcher settles it then), or it was handed back
	// published (its Invoke settles it).
	gaveUp, handed bool
}

// placed is where an invocation went: its message, or why it did not.
type placed struct {
	msg *sent
	err error
}

// dispatcher gathers an engine's invocations: while one message is being
// published, the invocations that come meanwhile wait and then go
// together, at most max and the inline limit's bytes a message.
type dispatcher struct {
	e   *Engine
	max int

	mu      sync.Mutex
	pending []*queuedInvocation
	busy    bool
}

// publish queues the invocation whose request body is data and returns
// once the message holding it is stored, or could not be by its
// deadline, or ctx ended.
func (d *dispatcher) publish(ctx context.Context, id string, data []byte, deadline time.Time) (*sent, error) {
	q := &queuedInvocation{id: id, data: data, deadline: deadline, done: make(chan placed, 1)}
	d.mu.Lock()
	d.pending = append(d.pending, q)
	if !d.busy {
		d.busy = true
		go d.drain()
	}
	d.mu.Unlock()
	select {
	case p := <-q.done:
		return p.msg, p.err
	case <-ctx.Done():
	}
	// Given up on: still waiting, it is not published at all; published
	// already, it is this Invoke's to settle; being published, the
	// dispatcher settles it once it is.
	d.mu.Lock()
	if i := slices.Index(d.pending, q); i >= 0 {
		d.pending = slices.Delete(d.pending, i, i+1)
		d.mu.Unlock()
		return nil, context.Cause(ctx)
	}
	handed := q.handed
	q.gaveUp = !handed
	d.mu.Unlock()
	if handed {
		if p := <-q.done; p.msg != nil {
			d.e.abandon(id, p.msg, d.e.settle(p.msg))
		}
	}
	return nil, context.Cause(ctx)
}

// drain publishes what waits until nothing does.
func (d *dispatcher) drain() {
	for {
		d.mu.Lock()
		if len(d.pending) == 0 {
			d.busy = false
			d.mu.Unlock()
			return
		}
		n := batchLen(len(d.pending), d.max, d.e.limit, func(i int) int { return len(d.pending[i].data) })
		take := d.pending[:n:n]
		d.pending = d.pending[n:]
		d.mu.Unlock()
		msg, err := d.publishBatch(take)
		var gone []*queuedInvocation // given up on while it was published
		d.mu.Lock()
		for _, q := range take {
			if q.handed = !q.gaveUp; q.gaveUp {
				gone = append(gone, q)
			}
		}
		d.mu.Unlock()
		for _, q := range take {
			q.done <- placed{msg, err}
		}
		if msg != nil {
			for _, q := range gone {
				d.e.abandon(q.id, msg, d.e.settle(msg))
			}
		}
	}
}

// publishBatch publishes one invocation on its own subject, or several
// as one batched message, until the latest of their deadlines.
func (d *dispatcher) publishBatch(take []*queuedInvocation) (*sent, error) {
	deadline := take[0].deadline
	for _, q := range take[1:] {
		if q.deadline.After(deadline) {
			deadline = q.deadline
		}
	}
	// The engine's publish gives up when it closes.
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	msg := &sent{ids: make([]string, len(take)), open: len(take)}
	for i, q := range take {
		msg.ids[i] = q.id
	}
	var token string
	var data []byte
	if len(take) == 1 {
		token, data = take[0].id, take[0].data
	} else {
		w := wireInvocations{Type: TypeInvocations, Invocations: make([]cbor.RawMessage, len(take))}
		for i, q := range take {
			w.Invocations[i] = q.data
		}
		var err error
		if data, err = cas.Marshal(&w); err != nil {
			return nil, err
		}
		token = batchToken + newID()
	}
	ack, err := d.e.publish(ctx, token, data, deadline)
	if err != nil {
		return nil, err
	}
	msg.seq = ack.Sequence
	d.e.mu.Lock()
	d.e.bySeq[msg.seq] = msg
	d.e.mu.Unlock()
	return msg, nil
}

// settle notes that one invocation of msg is answered or given up on,
// and reports whether msg has no open invocation left.
func (e *Engine) settle(msg *sent) bool {
	if msg == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	msg.open--
	if msg.open > 0 {
		return false
	}
	delete(e.bySeq, msg.seq)
	return true
}

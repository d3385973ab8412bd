package natsengine

import (
	"fmt"
	"slices"
	"sync"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/nats-io/nats.go"
)

// Heartbeats: a worker tells each engine, on core subjects, which of its
// invocations it runs: when it takes a message and then every
// AckWait/3. An engine's invocation alone in the message gets a
// [TypeHeartbeat] on PREFIX.beat.ENGINE.ID; several get one message for
// them all,
//
//	{"type": "hg/nats-heartbeats@1", "ids": [invocation ids], "worker": "ed25519:..."}
//
// on PREFIX.beat.ENGINE.batch-TOKEN (TOKEN 32 hex digits), at most
// [MaxBatchInvocations] ids. A heartbeat is information only (see the
// package documentation): one that does not decode strictly is dropped.

// TypeHeartbeats is a worker's heartbeat for several invocations of one
// engine at once.
const TypeHeartbeats = "hg/nats-heartbeats@1"

// wireHeartbeats is the body of a heartbeat for several invocations.
type wireHeartbeats struct {
	Type   string   `cbor:"type"`
	IDs    []string `cbor:"ids"`
	Worker string   `cbor:"worker"`
}

// decodeHeartbeats decodes a heartbeat for several invocations strictly:
// canonical DAG-CBOR with exactly its fields, its type, at most
// MaxBatchInvocations invocation ids and a worker key in their text forms.
func decodeHeartbeats(data []byte) (*wireHeartbeats, error) {
	var w wireHeartbeats
	if err := cas.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRefused, err)
	}
	if w.Type != TypeHeartbeats {
		return nil, fmt.Errorf("%w: type %q, want %q", ErrRefused, w.Type, TypeHeartbeats)
	}
	if len(w.IDs) > MaxBatchInvocations {
		return nil, fmt.Errorf("%w: %d ids, more than %d", ErrRefused, len(w.IDs), MaxBatchInvocations)
	}
	for _, id := range w.IDs {
		if !validID(id) {
			return nil, fmt.Errorf("%w: bad invocation id %q", ErrRefused, id)
		}
	}
	if _, err := ledger.ParsePublicKey(w.Worker); err != nil {
		return nil, fmt.Errorf("%w: worker: %v", ErrRefused, err)
	}
	return &w, nil
}

// beatSet is the invocations of one message a worker runs, whose engines
// its heartbeats tell.
type beatSet struct {
	w       *worker
	mu      sync.Mutex
	running map[string]string // invocation id -> its engine's ENGINE token
}

func (w *worker) newBeats() *beatSet {
	return &beatSet{w: w, running: map[string]string{}}
}

// add counts req among the invocations the heartbeats name.
func (b *beatSet) add(req *Request) {
	b.mu.Lock()
	b.running[req.ID] = engineOf(b.w.o.resultPrefix(), req.Reply)
	b.mu.Unlock()
}

// remove takes req out of them.
func (b *beatSet) remove(req *Request) {
	b.mu.Lock()
	delete(b.running, req.ID)
	b.mu.Unlock()
}

// beat sends each engine one heartbeat naming its invocations the set
// holds. Best effort: a heartbeat lost is no harm.
func (b *beatSet) beat() {
	b.mu.Lock()
	byEngine := map[string][]string{}
	for id, engine := range b.running {
		byEngine[engine] = append(byEngine[engine], id)
	}
	b.mu.Unlock()
	for engine, ids := range byEngine {
		var subject string
		var body any
		if len(ids) == 1 {
			subject, body = b.w.o.beatPrefix()+engine+"."+ids[0], &wireHeartbeat{Type: TypeHeartbeat, ID: ids[0], Worker: b.w.pub}
		} else {
			slices.Sort(ids)
			subject, body = b.w.o.beatPrefix()+engine+"."+batchToken+newID(), &wireHeartbeats{Type: TypeHeartbeats, IDs: ids, Worker: b.w.pub}
		}
		if data, err := cas.Marshal(body); err == nil {
			_ = b.w.nc.Publish(subject, data)
		}
	}
}

// onBeats hands a heartbeat for several invocations to each Invoke
// waiting for one of them (see [Engine.onBeat]).
func (e *Engine) onBeats(m *nats.Msg) {
	hb, err := decodeHeartbeats(m.Data)
	if err != nil {
		e.opts.Log("natsengine: heartbeat on %s: %v", m.Subject, err)
		return
	}
	for _, id := range hb.IDs {
		e.heard(id, hb.Worker)
	}
}

// heard tells the Invoke waiting for invocation id, if any, that worker
// says it runs it. A busy Invoke misses a heartbeat: the next one will do.
func (e *Engine) heard(id, worker string) {
	e.mu.Lock()
	w := e.waiting[id]
	e.mu.Unlock()
	if w == nil {
		return
	}
	select {
	case w.events <- event{beat: worker}:
	default:
	}
}

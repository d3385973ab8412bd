package natsengine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/nats-io/nats.go"
)

// A work message handed out again (its worker died, or handed it back)
// may hold invocations its engine already has the outcome of: a batch
// whose worker answered some of its members before it went. Before it
// runs such a message, a worker asks each engine named by its members'
// reply subjects, on the core subject PREFIX.want.ENGINE,
//
//	{"type": "hg/nats-want@1", "ids": [invocation ids]}
//
// and the engine answers with the same body holding those of the ids it
// still waits for an outcome of. The worker runs only those, and lets the
// others go as answered. An engine that does not answer within
// [wantWait] (it is gone, or the server is) gets them all run, as before
// there was a question to ask.
//
// The answer is information, never evidence: anyone who can answer on
// the worker's inbox, or publish a cancel, can make a worker skip work
// its engine then waits for (until its timeout); no one can make a
// scheduler accept anything by it.

// TypeWant is a worker's question to an engine, and the engine's answer.
const TypeWant = "hg/nats-want@1"

// wantWait bounds how long a worker waits for an engine's answer.
const wantWait = 2 * time.Second

// wireWant is the body of a question and of its answer.
type wireWant struct {
	Type string   `cbor:"type"`
	IDs  []string `cbor:"ids"`
}

// decodeWant decodes a question or an answer strictly: its type, at most
// MaxBatchInvocations ids, each an invocation id.
func decodeWant(data []byte) ([]string, error) {
	var w wireWant
	if err := cas.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRefused, err)
	}
	if w.Type != TypeWant {
		return nil, fmt.Errorf("%w: type %q, want %q", ErrRefused, w.Type, TypeWant)
	}
	if len(w.IDs) > MaxBatchInvocations {
		return nil, fmt.Errorf("%w: %d ids, more than %d", ErrRefused, len(w.IDs), MaxBatchInvocations)
	}
	for _, id := range w.IDs {
		if !validID(id) {
			return nil, fmt.Errorf("%w: bad invocation id %q", ErrRefused, id)
		}
	}
	return w.IDs, nil
}

// onWant answers a worker's question: which of these invocations does
// the engine still wait for an outcome of.
func (e *Engine) onWant(m *nats.Msg) {
	// An answer goes only to a requester's inbox: a question naming any
	// other reply subject (a result subject, a JetStream API request)
	// would have the engine publish there under its own permissions.
	if !strings.HasPrefix(m.Reply, nats.InboxPrefix) {
		e.opts.Log("natsengine: question on %s with the reply subject %q, not an inbox: not answered", m.Subject, m.Reply)
		return
	}
	ids, err := decodeWant(m.Data)
	if err != nil {
		e.opts.Log("natsengine: question on %s: %v", m.Subject, err)
		return
	}
	still := []string{}
	e.mu.Lock()
	for _, id := range ids {
		if w := e.waiting[id]; w != nil && !w.answered {
			still = append(still, id)
		}
	}
	e.mu.Unlock()
	data, err := cas.Marshal(&wireWant{Type: TypeWant, IDs: still})
	if err == nil {
		err = m.Respond(data)
	}
	if err != nil {
		e.opts.Log("natsengine: answer on %s: %v", m.Subject, err)
	}
}

// wanted asks the engine whose want subject is subject which of ids it
// still waits for. It returns nil when the engine gave no answer that
// decodes, and then every id is to be run.
func (w *worker) wanted(ctx context.Context, subject string, ids []string) map[string]bool {
	data, err := cas.Marshal(&wireWant{Type: TypeWant, IDs: ids})
	if err != nil {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, wantWait)
	defer cancel()
	m, err := w.nc.RequestWithContext(wctx, subject, data)
	if err != nil {
		return nil
	}
	still, err := decodeWant(m.Data)
	if err != nil {
		w.event(WorkerEvent{Event: EventError, Error: fmt.Sprintf("answer on %s: %v", subject, err)})
		return nil
	}
	asked := make(map[string]bool, len(ids))
	for _, id := range ids {
		asked[id] = true
	}
	out := make(map[string]bool, len(still))
	for _, id := range still {
		if asked[id] { // an answer names nothing it was not asked
			out[id] = true
		}
	}
	return out
}

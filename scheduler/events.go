package scheduler

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
	"github.com/ipfs/go-cid"
)

// TypeRunEvents is a block of a run's events (see [RunEvent]).
const TypeRunEvents = "hg/runevents@1"

// Kinds of [RunEvent].
const (
	// EventBreakerOpen: the scheduler would have started the node past
	// its limit of attempts; the node is blocked until a reset.
	EventBreakerOpen = "breaker-open"
	// EventBreakerReset: a person let the node run again (hg breaker
	// reset), saying why; its attempts count again from here.
	EventBreakerReset = "breaker-reset"
	// EventRegressed: a re-measurement of a done node's receipt no
	// longer holds (hg recheck): the node moves back to failed and what
	// depends on it to blocked. The receipt is never edited.
	EventRegressed = "regressed"
	// EventRewritten: a person named a later accepted receipt that
	// supersedes the node's work (hg supersede).
	EventRewritten = "rewritten"
	// EventDeleted: a person withdrew the node, saying why (hg withdraw).
	EventDeleted = "deleted"
)

// RunEvent is one event of a run: a move of a node that the scheduler's
// forward table ([dag.CanMove]) does not make, recorded with who made it,
// when and why. Events are kept in the run record ([Record.Events]), in
// the order they happened, and are never changed or removed.
type RunEvent struct {
	Kind string `cbor:"kind"`
	Node string `cbor:"node"`
	From string `cbor:"from"` // the node's state before
	To   string `cbor:"to"`   // and after
	// Receipt is the node's receipt the event concerns: the one that
	// regressed, the work rewritten or deleted, the last attempt when a
	// breaker opened.
	Receipt *cas.Link `cbor:"receipt,omitempty"`
	// By and ByNode (rewritten): the later accepted receipt, and the
	// RUN/NODE that holds it.
	By     *cas.Link `cbor:"by,omitempty"`
	ByNode string    `cbor:"by_node,omitempty"`
	// Check (regressed) is the check that no longer holds: a
	// verification check's name, or "replay".
	Check    string `cbor:"check,omitempty"`
	Reason   string `cbor:"reason"`   // the check's detail, or a person's why
	Attempts int64  `cbor:"attempts"` // the node's attempts at the time
	// Who made the move: a user name, or the scheduler; Key, the runner
	// key (ed25519:...) of the store it was made from, when it has one.
	Who string `cbor:"who"`
	Key string `cbor:"key,omitempty"`
	At  string `cbor:"at"`
}

// Actor is who records an event: a user (or the scheduler) and the
// runner key of the store, if any.
type Actor struct {
	Who string
	Key string
}

// eventsBlock is one block of a run's events: the events added in one
// write, oldest first, and the block written before it.
type eventsBlock struct {
	Type   string     `cbor:"type"`
	Run    string     `cbor:"run"`
	Events []RunEvent `cbor:"events"`
	Prior  *cas.Link  `cbor:"prior,omitempty"`
}

// eventsBlockBytes is about how many bytes of events one block holds: far
// below the block limit, whatever a recheck that regresses every node of
// a large run adds at once.
const eventsBlockBytes = 1 << 20

// maxReason bounds the text of an event's reason.
const maxReason = 4096

// clip cuts s to at most maxReason bytes, on a character boundary.
func clip(s string) string {
	if len(s) <= maxReason {
		return s
	}
	cut := maxReason - len(" ...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + " ..."
}

// encodeEvents encodes events as blocks chained after prior and returns
// them with the newest.
func encodeEvents(run string, events []RunEvent, prior *cas.Link) ([]cas.Block, *cas.Link, error) {
	var blocks []cas.Block
	flush := func(batch []RunEvent) error {
		data, err := cas.Marshal(&eventsBlock{Type: TypeRunEvents, Run: run, Events: batch, Prior: prior})
		if err != nil {
			return err
		}
		b := cas.NewBlock(cas.DagCBOR, data)
		blocks = append(blocks, b)
		prior = &cas.Link{Cid: b.CID()}
		return nil
	}
	start, size := 0, 0
	for i := range events {
		events[i].Reason = clip(events[i].Reason)
		data, err := cas.Marshal(&events[i])
		if err != nil {
			return nil, nil, err
		}
		if size+len(data) > eventsBlockBytes && i > start {
			if err := flush(events[start:i]); err != nil {
				return nil, nil, err
			}
			start, size = i, 0
		}
		size += len(data)
	}
	if start < len(events) {
		if err := flush(events[start:]); err != nil {
			return nil, nil, err
		}
	}
	return blocks, prior, nil
}

// loadEvents reads the chain of event blocks whose newest is head, and
// returns the events oldest first.
func loadEvents(ctx context.Context, st cas.Store, run string, head cid.Cid) ([]RunEvent, error) {
	var chain [][]RunEvent
	total := 0
	for c := &head; c != nil; {
		var b eventsBlock
		if err := st.View(ctx, *c, func(d []byte) error { return cas.Unmarshal(d, &b) }); err != nil {
			return nil, fmt.Errorf("events %s: %w", *c, err)
		}
		if b.Type != TypeRunEvents || b.Run != run || len(b.Events) == 0 {
			return nil, fmt.Errorf("%s is not a block of events of run %s: %w", *c, run, cas.ErrInvalid)
		}
		chain = append(chain, b.Events)
		total += len(b.Events)
		if b.Prior != nil {
			c = &b.Prior.Cid
		} else {
			c = nil
		}
	}
	out := make([]RunEvent, 0, total)
	for i := len(chain) - 1; i >= 0; i-- {
		out = append(out, chain[i]...)
	}
	return out, nil
}

// The circuit breaker.

// DefaultMaxAttempts is how many times a node may be started in a run,
// over every resume and retry, when neither its Work Order
// (max_attempts) nor its package's manifest says.
const DefaultMaxAttempts = 3

// MaxAttempts returns how many times node may be started in a run of the
// plan before its circuit breaker opens: the Work Order's max_attempts,
// else that of the node's package manifest, else [DefaultMaxAttempts].
func (p *Plan) MaxAttempts(node string) int64 {
	if p.WorkOrder != nil && p.WorkOrder.MaxAttempts > 0 {
		return int64(p.WorkOrder.MaxAttempts)
	}
	if pkg := p.Packages[node]; pkg != nil && pkg.Manifest.MaxAttempts > 0 {
		return int64(pkg.Manifest.MaxAttempts)
	}
	return DefaultMaxAttempts
}

// breakerDue reports whether node n may not be started again: it was
// started limit times since its breaker was last reset.
func breakerDue(n *NodeRecord, limit int64) bool {
	return n.Attempts-n.BreakerBase >= limit
}

// openBreaker blocks node n, whose breaker is due, and records the event.
func openBreaker(rec *Record, n *NodeRecord, limit int64, by Actor, at string) {
	from := n.State
	n.State, n.Breaker = dag.Blocked, true
	n.BlockedBy = n.Receipt
	n.Reason = fmt.Sprintf("breaker open: started %d times of %d allowed; 'hg breaker reset %s %s --why TEXT' lets it run again",
		n.Attempts-n.BreakerBase, limit, rec.Run, n.Name)
	rec.Events = append(rec.Events, RunEvent{Kind: EventBreakerOpen, Node: n.Name, From: from, To: dag.Blocked,
		Receipt: n.Receipt, Reason: n.Reason, Attempts: n.Attempts, Who: by.Who, Key: by.Key, At: at})
}

// ErrNotAllowed is wrapped by a move the node's state does not allow.
var ErrNotAllowed = fmt.Errorf("not allowed")

// ResetBreaker lets node run again in run (hg breaker reset): its
// attempts count again from now, and a node its open breaker blocked
// runs on the next retry (hg resume --retry). The reset is recorded as an
// event with who made it and why. A node that is done, rewritten or
// deleted, or that was not started since its last reset, has nothing to
// reset. The caller makes sure no process executes the run.
func ResetBreaker(ctx context.Context, st cas.Store, run, node string, by Actor, why string, now string) (*Record, error) {
	rec, _, err := LoadRecord(ctx, st, run)
	if err != nil {
		return nil, err
	}
	n := rec.node(node)
	switch {
	case n == nil:
		return nil, fmt.Errorf("run %s has no node %q", run, node)
	case n.State == dag.Done || n.State == dag.Rewritten || n.State == dag.Deleted:
		return nil, fmt.Errorf("node %s of run %s is %s: it has no breaker to reset: %w", node, run, n.State, ErrNotAllowed)
	case !n.Breaker && n.Attempts == n.BreakerBase:
		return nil, fmt.Errorf("node %s of run %s was not started since its breaker was last reset: %w", node, run, ErrNotAllowed)
	}
	was := n.Breaker
	n.Breaker, n.BreakerBase = false, n.Attempts
	if was {
		n.Reason = fmt.Sprintf("breaker reset by %s: %s; 'hg resume --retry %s' runs it again", by.Who, why, run)
	}
	rec.Events = append(rec.Events, RunEvent{Kind: EventBreakerReset, Node: node, From: n.State, To: n.State,
		Receipt: n.Receipt, Reason: why, Attempts: n.Attempts, Who: by.Who, Key: by.Key, At: now})
	rec.Updated = now
	return rec, saveRecord(ctx, st, rec)
}

// saveRecord stores a whole record and moves the run's ref to it.
func saveRecord(ctx context.Context, st cas.Store, rec *Record) error {
	blocks, root, err := encodeRecord(ctx, rec, nil)
	if err != nil {
		return err
	}
	if err := st.Put(ctx, blocks...); err != nil {
		return err
	}
	return st.SetRef(ctx, RefNamespace, rec.Run, root)
}

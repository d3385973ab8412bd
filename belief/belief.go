// Package belief keeps, per task class, an append-only log of decisions:
// hg/belief@1 events (assert, update, supersede, retract), each linked to
// the one before it and naming the run or person that caused it, whose
// reduction is the current state: which decision slots are bound, to
// what. The clarifier (Clarify) asks before a Work Order runs only the
// critical slots that state leaves unbound; a run that reaches its outcome
// writes the decisions it used back (Crystallize), so the next order of
// its class asks fewer questions; a retraction re-opens exactly one slot.
package belief

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
)

// TypeBelief is the type of a belief-log event.
const TypeBelief = "hg/belief@1"

// RefNamespace holds, per task class, the newest event of its log.
const RefNamespace = "belief"

// The operations of an event.
const (
	OpAssert    = "assert"    // bind an unbound slot
	OpUpdate    = "update"    // a person changes a bound slot's value
	OpSupersede = "supersede" // a run's decision replaces a bound slot's value
	OpRetract   = "retract"   // unbind: the slot is asked again
)

// Event is one belief-log event.
type Event struct {
	Type  string    `cbor:"type"`
	Class string    `cbor:"class"`
	Slot  string    `cbor:"slot"`
	Op    string    `cbor:"op"`
	Value any       `cbor:"value"` // null for a retraction
	Cause Cause     `cbor:"cause"`
	Why   string    `cbor:"why"` // a retraction's reason; may be empty otherwise
	At    string    `cbor:"at"`  // RFC 3339, UTC
	Prior *cas.Link `cbor:"prior,omitempty"`
}

// Cause is who or what caused an event: a run that reached its outcome
// (Ref its id; Source where the answer it used came from: "terminal",
// "file") or a person (Ref their name, from hg belief).
type Cause struct {
	Kind   string `cbor:"kind"` // run, person
	Ref    string `cbor:"ref"`
	Source string `cbor:"source"`
}

// String describes the cause for people.
func (c Cause) String() string {
	switch c.Kind {
	case "run":
		switch c.Source {
		case SourceTerminal:
			return "run " + c.Ref + " (answered on the terminal)"
		case SourceFile:
			return "run " + c.Ref + " (answered from a file)"
		case SourceClient:
			return "run " + c.Ref + " (answered by an MCP client)"
		}
		return "run " + c.Ref
	case "person":
		return c.Ref
	}
	return c.Kind + " " + c.Ref
}

// Entry is an event of a log with its CID.
type Entry struct {
	CID cid.Cid
	Event
}

// MaxEvents bounds the log a reading follows, against a cycle of forged
// links or a runaway writer.
const MaxEvents = 100000

// ErrBadLog wraps every problem found reading a log.
var ErrBadLog = errors.New("belief log")

// Log returns the events of class's log, oldest first; none for a class
// that has no log.
func Log(ctx context.Context, st cas.Store, class string) ([]Entry, error) {
	head, err := st.GetRef(ctx, RefNamespace, class)
	if errors.Is(err, cas.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Entry
	for c := head; c.Defined(); {
		if len(out) >= MaxEvents {
			return nil, fmt.Errorf("%w of %s: longer than %d events", ErrBadLog, class, MaxEvents)
		}
		var ev Event
		if err := st.View(ctx, c, func(data []byte) error { return cas.Unmarshal(data, &ev) }); err != nil {
			return nil, fmt.Errorf("%w of %s: event %s: %w", ErrBadLog, class, c, err)
		}
		if ev.Type != TypeBelief || ev.Class != class {
			return nil, fmt.Errorf("%w of %s: %s is not an event of it", ErrBadLog, class, c)
		}
		out = append(out, Entry{CID: c, Event: ev})
		c = cid.Undef
		if ev.Prior != nil {
			c = ev.Prior.Cid
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// Binding is a bound slot of the current state.
type Binding struct {
	Value any
	Event Entry // the event that bound it
}

// Reduce returns the state a log leaves: every slot bound and not
// retracted since, with the event that bound it last.
func Reduce(log []Entry) map[string]Binding {
	state := map[string]Binding{}
	for _, e := range log {
		switch e.Op {
		case OpRetract:
			delete(state, e.Slot)
		default:
			state[e.Slot] = Binding{Value: e.Value, Event: e}
		}
	}
	return state
}

// Append adds ev to its class's log, after the newest event, and returns
// its CID. Type, At and Prior are set here.
func Append(ctx context.Context, st cas.Store, ev Event) (cid.Cid, error) {
	out, err := appendAll(ctx, st, ev.Class, []Event{ev})
	if err != nil {
		return cid.Undef, err
	}
	return out[0], nil
}

// appendAll adds evs, all of class, to its log in order, all or none:
// every event is stored before the log's ref moves, once, to the last.
// Type, At and Prior are set here.
func appendAll(ctx context.Context, st cas.Store, class string, evs []Event) ([]cid.Cid, error) {
	if err := dag.CheckClass(class); err != nil {
		return nil, err
	}
	var prior *cas.Link
	head, err := st.GetRef(ctx, RefNamespace, class)
	switch {
	case errors.Is(err, cas.ErrNotFound):
	case err != nil:
		return nil, err
	default:
		prior = &cas.Link{Cid: head}
	}
	var (
		blocks []cas.Block
		out    []cid.Cid
	)
	for _, ev := range evs {
		if ev.Class != class {
			return nil, fmt.Errorf("an event of class %q in the log of %q", ev.Class, class)
		}
		ev.Type = TypeBelief
		if ev.At == "" {
			ev.At = time.Now().UTC().Format(time.RFC3339Nano)
		}
		ev.Prior = prior
		data, err := cas.Marshal(&ev)
		if err != nil {
			return nil, err
		}
		b := cas.NewBlock(cas.DagCBOR, data)
		blocks = append(blocks, b)
		out = append(out, b.CID())
		prior = &cas.Link{Cid: b.CID()}
	}
	if len(blocks) == 0 {
		return nil, nil
	}
	if err := st.Put(ctx, blocks...); err != nil {
		return nil, err
	}
	if err := st.SetRef(ctx, RefNamespace, class, out[len(out)-1]); err != nil {
		return nil, err
	}
	return out, nil
}

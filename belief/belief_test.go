package belief_test

import (
	"context"
	"errors"
	"testing"

	"github.com/haygent/hg/belief"
	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/dag"
)

const order = `{
  "workorder": "w", "class": "c", "objective": "o",
  "decisions": {
    "a": {"question": "A?", "allowed": ["x", "y"], "critical": true, "into": [{"node": "n", "pointer": "/a"}]},
    "b": {"question": "B?", "schema": {"type": "integer"}, "critical": true, "into": [{"node": "n", "pointer": "/b"}]},
    "d": {"question": "D?", "default": 1, "into": [{"node": "n", "pointer": "/d"}]}
  },
  "nodes": {"n": {"haygent": "h", "input": {}}}
}`

func parse(t *testing.T) *dag.WorkOrder {
	t.Helper()
	wo, err := dag.Parse([]byte(order))
	if err != nil {
		t.Fatal(err)
	}
	if err := wo.Validate(nil); err != nil {
		t.Fatal(err)
	}
	return wo
}

func appendEv(t *testing.T, st cas.Store, slot, op string, v any) {
	t.Helper()
	if _, err := belief.Append(context.Background(), st, belief.Event{Class: "c", Slot: slot, Op: op, Value: v,
		Cause: belief.Cause{Kind: "person", Ref: "tester"}}); err != nil {
		t.Fatal(err)
	}
}

// The log is a chain, oldest first, and reduces to what is bound now.
func TestLogReduces(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	if log, err := belief.Log(ctx, st, "c"); err != nil || len(log) != 0 {
		t.Fatalf("empty class: %v, %v", log, err)
	}
	appendEv(t, st, "a", belief.OpAssert, "x")
	appendEv(t, st, "b", belief.OpAssert, int64(2))
	appendEv(t, st, "a", belief.OpUpdate, "y")
	appendEv(t, st, "b", belief.OpRetract, nil)
	log, err := belief.Log(ctx, st, "c")
	if err != nil || len(log) != 4 {
		t.Fatalf("log: %d events, %v", len(log), err)
	}
	if log[0].Prior != nil || log[3].Prior == nil || log[3].Prior.Cid != log[2].CID {
		t.Fatal("the events are not chained oldest first")
	}
	state := belief.Reduce(log)
	if len(state) != 1 || state["a"].Value != "y" || state["a"].Event.CID != log[2].CID {
		t.Fatalf("state %+v", state)
	}
	// Another class's head is not this class's log.
	head, err := st.GetRef(ctx, belief.RefNamespace, "c")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetRef(ctx, belief.RefNamespace, "other", head); err != nil {
		t.Fatal(err)
	}
	if _, err := belief.Log(ctx, st, "other"); !errors.Is(err, belief.ErrBadLog) {
		t.Fatalf("a log of another class read as this one's: %v", err)
	}
}

// Clarify takes what the state binds and the decision allows, defaults
// what is not critical, and leaves the rest open; Answer checks.
func TestClarify(t *testing.T) {
	wo := parse(t)
	st := memstore.New()
	all, open := belief.Clarify(wo, nil)
	if len(all) != 3 || len(open) != 2 || all[2].Source != belief.SourceDefault || all[2].Value != int64(1) {
		t.Fatalf("nothing known: all %d, open %d, d %+v", len(all), len(open), all[2])
	}
	appendEv(t, st, "a", belief.OpAssert, "z") // no longer allowed
	appendEv(t, st, "b", belief.OpAssert, int64(5))
	log, err := belief.Log(context.Background(), st, "c")
	if err != nil {
		t.Fatal(err)
	}
	all, open = belief.Clarify(wo, belief.Reduce(log))
	if len(open) != 1 || open[0].Decision.Name != "a" || open[0].Note == "" {
		t.Fatalf("a value the decision refuses must leave it open, with a note: %+v", open)
	}
	if all[1].Source != belief.SourceBelief || all[1].Value != int64(5) || !all[1].Event.Defined() {
		t.Fatalf("b from the log: %+v", all[1])
	}
	if err := open[0].Answer("q", belief.SourceFile); err == nil {
		t.Fatal("an answer outside the allowed values is taken")
	}
	if err := open[0].Answer("x", belief.SourceFile); err != nil || !open[0].Asked {
		t.Fatal(err)
	}
	if err := wo.Bind(belief.Values(all)); err != nil {
		t.Fatal(err)
	}
	in := wo.Nodes["n"].Input()
	if in["a"] != "x" || in["b"] != int64(5) || in["d"] != int64(1) {
		t.Fatalf("input after Bind: %v", in)
	}
}

// Crystallize writes the asked answers the log lacks, and only those.
func TestCrystallize(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	appendEv(t, st, "b", belief.OpAssert, int64(5))
	used := []belief.Crystal{
		{Slot: "a", Value: "x", Source: belief.SourceTerminal, Asked: true},  // new: assert
		{Slot: "b", Value: int64(5), Source: belief.SourceFile, Asked: true}, // known: nothing
		{Slot: "d", Value: int64(1), Source: belief.SourceDefault},           // a default: nothing
	}
	written, err := belief.Crystallize(ctx, st, "c", "run-1", used)
	if err != nil || len(written) != 1 {
		t.Fatalf("written %d, %v", len(written), err)
	}
	used[1].Value = int64(6) // a different answer than the log's: supersede
	if written, err = belief.Crystallize(ctx, st, "c", "run-2", used); err != nil || len(written) != 1 {
		t.Fatalf("written %d, %v", len(written), err)
	}
	log, _ := belief.Log(ctx, st, "c")
	last := log[len(log)-1]
	if last.Op != belief.OpSupersede || last.Slot != "b" || last.Cause.Ref != "run-2" || last.Cause.Source != belief.SourceFile {
		t.Fatalf("last event %+v", last.Event)
	}
}

// An answer is taken as it goes into the input: 7.0 is the integer 7.
func TestAnswerNormalized(t *testing.T) {
	_, open := belief.Clarify(parse(t), nil)
	b := open[1]
	if b.Decision.Name != "b" {
		t.Fatalf("open %v", b.Decision.Name)
	}
	if err := b.Answer(7.0, belief.SourceTerminal); err != nil || b.Value != int64(7) {
		t.Fatalf("7.0: %v, %#v", err, b.Value)
	}
	if err := b.Answer(map[string]any{"from": "n", "pointer": "/x"}, belief.SourceFile); err == nil {
		t.Fatal("an answer shaped like a reference is taken")
	}
}

// AnswerFrom uses or refuses every answer: it answers what the log does
// not bind (over a default too), keeps the log's value when the answer is
// the same, and refuses, together and before judging any value, a name no
// decision has and an answer the log binds otherwise.
func TestAnswerFrom(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	appendEv(t, st, "b", belief.OpAssert, int64(5))
	log, err := belief.Log(ctx, st, "c")
	if err != nil {
		t.Fatal(err)
	}
	clarify := func() []*belief.Resolved {
		all, _ := belief.Clarify(parse(t), belief.Reduce(log))
		return all
	}

	// The log's own value (7.0 is 7, as in an input), an open decision,
	// and one with a default: all taken; nothing left open.
	all := clarify()
	open, err := belief.AnswerFrom("c", all, map[string]any{"a": "x", "b": 5.0, "d": int64(9)}, belief.SourceFile)
	if err != nil || len(open) != 0 {
		t.Fatalf("open %v, %v", open, err)
	}
	if a := all[0]; a.Value != "x" || a.Source != belief.SourceFile || !a.Asked {
		t.Errorf("a: %+v", a)
	}
	if b := all[1]; b.Value != int64(5) || b.Source != belief.SourceBelief || b.Asked || b.Event != log[0].CID {
		t.Errorf("b, the log's value again, must stay the log's: %+v", b)
	}
	if d := all[2]; d.Value != int64(9) || d.Source != belief.SourceFile || !d.Asked {
		t.Errorf("d, over its default: %+v", d)
	}

	// No answers: the critical decision the log does not bind stays open.
	if open, err := belief.AnswerFrom("c", clarify(), map[string]any{}, belief.SourceFile); err != nil || len(open) != 1 || open[0].Decision.Name != "a" {
		t.Fatalf("open %v, %v", open, err)
	}

	// Another value than the log's, and a name no decision has: refused
	// together, before the bad value of a is judged, and nothing bound.
	all = clarify()
	_, err = belief.AnswerFrom("c", all, map[string]any{"a": "not allowed", "b": int64(6), "e": 1}, belief.SourceFile)
	var ae *belief.AnswersError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v, want an AnswersError", err)
	}
	if len(ae.Unknown) != 1 || ae.Unknown[0] != "e" || len(ae.Conflicts) != 1 {
		t.Fatalf("%+v", ae)
	}
	if c := ae.Conflicts[0]; c.Slot != "b" || c.Answer != int64(6) || c.Log.Value != int64(5) || c.Log.Event.CID != log[0].CID {
		t.Fatalf("conflict %+v", c)
	}
	want := `"e" names no decision of the Work Order (its decisions: a, b, d); decision "b": the belief log of class c binds it to 5 (assert by tester, event ` +
		log[0].CID.String() + `), the answers file says 6; an answers file does not override the log: change it first with 'hg belief retract c b --why TEXT' (then answer it) or 'hg belief assert c b VALUE'`
	if err.Error() != want {
		t.Errorf("error:\n%s\nwant\n%s", err, want)
	}
	if all[0].Bound || all[1].Value != int64(5) {
		t.Errorf("a refused set of answers bound something: %+v %+v", all[0], all[1])
	}

	// A value the decision does not allow: the decision's own error.
	if _, err := belief.AnswerFrom("c", clarify(), map[string]any{"a": "q"}, belief.SourceFile); err == nil || errors.As(err, &ae) ||
		err.Error() != `decision "a": "q" is not one of "x" or "y"` {
		t.Fatalf("err = %v", err)
	}
}

// failingPuts is a store whose Put fails after n blocks.
type failingPuts struct {
	cas.Store
	n int
}

func (f *failingPuts) Put(ctx context.Context, bs ...cas.Block) error {
	for _, b := range bs {
		if f.n == 0 {
			return errors.New("disk full")
		}
		f.n--
		if err := f.Store.Put(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

// A run's answers are learned all or none: a store that fails half-way
// through leaves the log as it was.
func TestCrystallizeAllOrNothing(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	used := []belief.Crystal{
		{Slot: "a", Value: "x", Source: belief.SourceClient, Asked: true},
		{Slot: "b", Value: int64(5), Source: belief.SourceClient, Asked: true},
	}
	if _, err := belief.Crystallize(ctx, &failingPuts{Store: st, n: 1}, "c", "run-1", used); err == nil {
		t.Fatal("no error from a store that failed")
	}
	if log, err := belief.Log(ctx, st, "c"); err != nil || len(log) != 0 {
		t.Fatalf("after a failed crystallization: %d events, %v", len(log), err)
	}
	written, err := belief.Crystallize(ctx, st, "c", "run-1", used)
	if err != nil || len(written) != 2 {
		t.Fatalf("written %d, %v", len(written), err)
	}
	log, err := belief.Log(ctx, st, "c")
	if err != nil || len(log) != 2 || log[0].Slot != "a" || log[1].Slot != "b" || log[1].Event.Prior == nil || log[1].Event.Prior.Cid != log[0].CID {
		t.Fatalf("log %+v, %v", log, err)
	}
}

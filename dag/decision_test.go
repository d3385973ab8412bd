package dag_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
)

func decisionOrder(decisions, extra string) string {
	return `{"workorder": "w", "objective": "o", ` + extra + `"decisions": ` + decisions + `,
	 "nodes": {"n": {"haygent": "h", "input": {"v": {}}}}}`
}

// Each malformed decision is named by its field.
func TestDecisionsRefused(t *testing.T) {
	for _, c := range []struct{ decisions, field, msg string }{
		{`{"a": {"into": [{"node": "n", "pointer": "/x"}]}}`, "decisions/a/question", "required"},
		{`{"a": {"question": "Q"}}`, "decisions/a/into", "required"},
		{`{"a": {"question": "Q", "allowed": [], "into": [{"node": "n", "pointer": "/x"}]}}`, "decisions/a/allowed", "non-empty"},
		{`{"a": {"question": "Q", "into": [{"node": "n", "pointer": "x"}]}}`, "decisions/a/into/0/pointer", "JSON Pointer"},
		{`{"a": {"question": "Q", "into": [{"node": "n"}]}}`, "decisions/a/into/0", "pointer"},
		{`{"a": {"question": "Q", "critical": true, "default": 1, "into": [{"node": "n", "pointer": "/x"}]}}`, "decisions/a/default", "never defaulted"},
		{`{"a": {"question": "Q", "allowed": [1], "default": 2, "into": [{"node": "n", "pointer": "/x"}]}}`, "decisions/a/default", "not one of"},
		{`{"a": {"question": "Q", "schema": {"type": "nope"}, "into": [{"node": "n", "pointer": "/x"}]}}`, "decisions/a/schema", ""},
		{`{"a": {"question": "Q", "colour": 1, "into": [{"node": "n", "pointer": "/x"}]}}`, "decisions/a/colour", "unknown field"},
		{`{"a b": {"question": "Q", "into": [{"node": "n", "pointer": "/x"}]}}`, "decisions/a b", "invalid decision name"},
	} {
		_, err := dag.Parse([]byte(decisionOrder(c.decisions, "")))
		if !hasProblem(err, c.field, c.msg) {
			t.Errorf("%s: %v; want field %q with %q", c.decisions, err, c.field, c.msg)
		}
	}
}

// What only the graph shows is Validate's: unknown nodes, a place with no
// parent, two decisions on one place, an unknown mandatory node.
func TestDecisionsValidated(t *testing.T) {
	for _, c := range []struct{ decisions, extra, field, msg string }{
		{`{"a": {"question": "Q", "into": [{"node": "m", "pointer": "/x"}]}}`, "", "decisions/a/into/0/node", `unknown node "m"`},
		{`{"a": {"question": "Q", "into": [{"node": "n", "pointer": "/none/x"}]}}`, "", "decisions/a/into/0/pointer", "no member"},
		{`{"a": {"question": "Q", "into": [{"node": "n", "pointer": "/x"}]}, "b": {"question": "Q", "into": [{"node": "n", "pointer": "/x"}]}}`, "", "decisions/b/into/0", `decision "a" sets`},
		{`{}`, `"outcome": {"mandatory": ["ghost"]}, `, "outcome/mandatory/0", `unknown node "ghost"`},
	} {
		doc := decisionOrder(c.decisions, "")
		if c.extra != "" {
			doc = strings.Replace(doc, `"decisions"`, c.extra+`"decisions"`, 1)
		}
		wo, err := dag.Parse([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", c.decisions, err)
		}
		if err := wo.Validate(nil); !hasProblem(err, c.field, c.msg) {
			t.Errorf("%s: %v; want field %q with %q", c.decisions, err, c.field, c.msg)
		}
	}
}

func TestClassDefaultsToName(t *testing.T) {
	wo, err := dag.Parse([]byte(decisionOrder(`{}`, "")))
	if err != nil || wo.Class != "w" {
		t.Fatalf("class %q, %v", wo.Class, err)
	}
	wo, err = dag.Parse([]byte(decisionOrder(`{}`, `"class": "release", `)))
	if err != nil || wo.Class != "release" {
		t.Fatalf("class %q, %v", wo.Class, err)
	}
	if _, err := dag.Parse([]byte(decisionOrder(`{}`, `"class": "no spaces", `))); !hasProblem(err, "class", "") {
		t.Fatalf("a bad class: %v", err)
	}
}

func hasProblem(err error, field, msg string) bool {
	for _, p := range dag.Problems(err) {
		if p.Field == field && strings.Contains(p.Msg, msg) {
			return true
		}
	}
	return false
}

// An answer shaped like a reference would be read as one: refused, and so
// is a place inside a reference.
func TestDecisionsAndReferences(t *testing.T) {
	wo, err := dag.Parse([]byte(`{"workorder": "w", "objective": "o",
	  "decisions": {"cfg": {"question": "Q", "critical": true, "into": [{"node": "n", "pointer": "/v/cfg"}]}},
	  "nodes": {"up": {"haygent": "h"}, "n": {"haygent": "h", "needs": ["up"], "input": {"v": {}, "r": {"from": "up", "pointer": "/x"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	d := wo.Decisions["cfg"]
	for _, v := range []any{
		map[string]any{"from": "up", "pointer": "/x"},
		[]any{int64(1), map[string]any{"a": map[string]any{"from": "up", "pointer": "/x"}}},
	} {
		if err := d.Check(v); err == nil || !strings.Contains(err.Error(), "shaped like a reference") {
			t.Errorf("%v: %v", v, err)
		}
	}
	if err := d.Check(map[string]any{"from": "up"}); err != nil {
		t.Errorf("an object with one of the two keys: %v", err)
	}
	wo2, err := dag.Parse([]byte(`{"workorder": "w", "objective": "o",
	  "decisions": {"cfg": {"question": "Q", "into": [{"node": "n", "pointer": "/r/into"}]}},
	  "nodes": {"up": {"haygent": "h"}, "n": {"haygent": "h", "needs": ["up"], "input": {"r": {"from": "up", "pointer": "/x"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := wo2.Validate(nil); !hasProblem(err, "decisions/cfg/into/0/pointer", "reference") {
		t.Fatalf("a place inside a reference: %v", err)
	}
}

// outcome.mandatory is kept in the stored Work Order, so that resuming or
// verifying a run applies the same gate.
func TestMandatoryStored(t *testing.T) {
	wo, err := dag.Parse([]byte(`{"workorder": "w", "objective": "o",
	  "nodes": {"a": {"haygent": "h"}, "b": {"haygent": "h"}},
	  "outcome": {"require": ["a"], "mandatory": ["b"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	pkg := cas.Sum(cas.DagCBOR, []byte("pkg"))
	obj, err := wo.Object(map[string]cid.Cid{"h": pkg})
	if err != nil {
		t.Fatal(err)
	}
	back, err := dag.FromObject(obj)
	if err != nil || !slices.Equal(back.Mandatory, []string{"b"}) {
		t.Fatalf("mandatory after a round trip: %v, %v", back.Mandatory, err)
	}
}

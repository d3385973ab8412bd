package dag_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/haygent/hg/dag"
)

// example is the Work Order of the package documentation.
const example = `{
  "workorder": "release-check",
  "objective": "build, test and package the demo service",
  "nodes": {
    "build": {"haygent": "../haygents/build", "input": {"target": "./..."}},
    "test":  {"haygent": "../haygents/gotest", "needs": ["build"],
              "input": {"tree": {"from": "build", "pointer": "/tree"}}},
    "pack":  {"haygent": "../haygents/pack", "needs": ["test"]}
  },
  "outcome": {"require": ["pack"]}
}`

func TestParseExample(t *testing.T) {
	w := mustParse(t, example)
	if w.Name != "release-check" || w.Objective != "build, test and package the demo service" {
		t.Errorf("name %q, objective %q", w.Name, w.Objective)
	}
	if want := []string{"build", "test", "pack"}; !reflect.DeepEqual(w.Order, want) {
		t.Errorf("Order = %q, want %q (as written)", w.Order, want)
	}
	test := w.Nodes["test"]
	if test.Haygent != "../haygents/gotest" || !reflect.DeepEqual(test.Needs, []string{"build"}) {
		t.Errorf("test = %+v", test)
	}
	if got, want := test.Refs(), []dag.Ref{{At: "/tree", From: "build", Pointer: "/tree"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Refs = %+v, want %+v", got, want)
	}
	if got := w.Nodes["pack"].Input(); got == nil || len(got) != 0 {
		t.Errorf("pack input = %#v, want an empty map", got)
	}
	if got := w.Required(); !reflect.DeepEqual(got, []string{"pack"}) {
		t.Errorf("Required = %q", got)
	}
	if err := w.Validate(nil); err != nil {
		t.Errorf("Validate(nil): %v", err)
	}
}

func TestParseOrderKept(t *testing.T) {
	w := mustParse(t, `{"workorder":"o","objective":"x","nodes":{
		"zeta":{"haygent":"h"},"alpha":{"haygent":"h"},"Mid":{"haygent":"h"},"9":{"haygent":"h"}}}`)
	if want := []string{"zeta", "alpha", "Mid", "9"}; !reflect.DeepEqual(w.Order, want) {
		t.Errorf("Order = %q, want %q", w.Order, want)
	}
	if got := w.Required(); !reflect.DeepEqual(got, w.Order) {
		t.Errorf("Required without outcome = %q, want every node %q", got, w.Order)
	}
}

func TestParseInputDataModel(t *testing.T) {
	w := mustParse(t, `{"workorder":"o","objective":"x","nodes":{"a":{"haygent":"h","input":{
		"i": 3, "f": 1.5, "e": 1e3, "big": 18446744073709551615, "s": "é", "n": null, "b": true,
		"arr": [1, {"from": "z", "pointer": ""}], "three": {"from": "z", "pointer": "/x", "more": 1},
		"x/y": {"k~": {"from": "q", "pointer": "/a~1b"}}}}}}`)
	in := w.Nodes["a"].Input()
	if _, ok := in["i"].(int64); !ok {
		t.Errorf("i is %T, want int64", in["i"])
	}
	if _, ok := in["e"].(float64); !ok {
		t.Errorf("e is %T, want float64", in["e"])
	}
	got := w.Nodes["a"].Refs()
	want := []dag.Ref{
		{At: "/arr/1", From: "z", Pointer: ""},
		{At: "/x~1y/k~0", From: "q", Pointer: "/a~1b"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Refs = %+v, want %+v", got, want)
	}
}

func TestParseErrors(t *testing.T) {
	const rule = "want a letter or digit, then up to 63 letters, digits, '_', '.' or '-'"
	// wrap puts nodes (the inside of "nodes") into a valid document.
	wrap := func(nodes string) string {
		return `{"workorder":"w","objective":"o","nodes":{` + nodes + `}}`
	}
	long := strings.Repeat("n", 65)
	deep := strings.Repeat("[", 300) + strings.Repeat("]", 300)
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"not an object", `[]`, []string{"a Work Order must be a JSON object"}},
		{"a string", `"x"`, []string{"a Work Order must be a JSON object"}},
		{"trailing data", `{} {}`, []string{"invalid JSON: data after the Work Order"}},
		{"truncated", `{"workorder":`, []string{"invalid JSON: unexpected EOF"}},
		{"invalid UTF-8", "{\"workorder\":\"\xff\"}", []string{"not valid UTF-8"}},
		{"too deep", wrap(`"a":{"haygent":"h","input":{"x":` + deep + `}}`), []string{"nested deeper than 256"}},
		{"duplicate node", wrap(`"a":{"haygent":"x"},"b":{"haygent":"x"},"a":{"haygent":"y"}`),
			[]string{`node "a": duplicate node name`}},
		{"duplicate node, escaped", wrap(`"a":{"haygent":"x"},"\u0061":{"haygent":"y"}`),
			[]string{`node "a": duplicate node name`}},
		{"duplicate top key", `{"workorder":"a","workorder":"b"}`, []string{`field "workorder": duplicate key`}},
		{"duplicate node key", wrap(`"a":{"haygent":"x","haygent":"y"}`), []string{`node "a": field "haygent": duplicate key`}},
		{"duplicate input key", wrap(`"a":{"haygent":"x","input":{"v":{"k/":1,"k/":2}}}`),
			[]string{`node "a": field "input/v/k~1": duplicate key`}},
		{"duplicate outcome key", `{"outcome":{"require":[],"require":[]}}`, []string{`field "outcome/require": duplicate key`}},
		{"empty document", `{}`, []string{
			`field "workorder": required`, `field "objective": required`, `field "nodes": required`}},
		{"unknown and case-folded fields", `{"Workorder":"w","workorder":"w","objective":"o","nodes":{},"extra":1}`, []string{
			`field "Workorder": unknown field`, `field "extra": unknown field`}},
		{"bad workorder name", `{"workorder":"-w","objective":" ","nodes":{}}`, []string{
			`field "workorder": name "-w": ` + rule, `field "objective": must not be empty`}},
		{"wrong top types", `{"workorder":1,"objective":null,"nodes":[],"outcome":"x"}`, []string{
			`field "workorder": want a string`, `field "objective": want a string`,
			`field "nodes": want an object`, `field "outcome": want an object`}},
		{"outcome", `{"workorder":"w","objective":"o","nodes":{},"outcome":{"require":"a","requires":[]}}`, []string{
			`field "outcome/requires": unknown field`, `field "outcome/require": want an array of strings`}},
		{"outcome require null", `{"workorder":"w","objective":"o","nodes":{},"outcome":{"require":null}}`, []string{
			`field "outcome/require": want an array of strings`}},
		{"bad node names", wrap(`"-a":{"haygent":"h"},"b c":{"haygent":"h"},"` + long + `":{"haygent":"h"},"":{"haygent":"h"}`), []string{
			`node "-a": invalid node name: ` + rule,
			`node "b c": invalid node name: ` + rule,
			`node "` + long + `": invalid node name: ` + rule,
			`field "nodes": empty node name`,
		}},
		{"node not an object", wrap(`"a":[]`), []string{`node "a": want an object`}},
		{"node fields", wrap(`"a":{"hayegnt":"h","Needs":[]}`), []string{
			`node "a": field "Needs": unknown field`, `node "a": field "hayegnt": unknown field`,
			`node "a": field "haygent": required`}},
		{"node types", wrap(`"a":{"haygent":null,"needs":["b",1],"input":[]},"b":{"haygent":"","needs":"a","input":null}`), []string{
			`node "a": field "haygent": want a string`, `node "a": field "needs": want an array of strings`,
			`node "a": field "input": want an object`,
			`node "b": field "haygent": must not be empty`, `node "b": field "needs": want an array of strings`,
			`node "b": field "input": want an object`}},
		{"link in input", wrap(`"a":{"haygent":"h","input":{"l":{"/":"bafyreigbtj4x7ip5legnfznufuopl4sg4knzc2cof6duas4b3q2fy6swua"}}}`), []string{
			`node "a": field "input/l": DAG-JSON links and bytes are not allowed in an input`}},
		{"bytes in input", wrap(`"a":{"haygent":"h","input":{"l":[{"/":{"bytes":"AAE"}}]}}`), []string{
			`node "a": field "input/l/0": DAG-JSON links and bytes are not allowed in an input`}},
		{"bad reference", wrap(`"a":{"haygent":"h","input":{"r":{"from":1,"pointer":"/x"},"s":[{"from":"b","pointer":null}]}}`), []string{
			`node "a": field "input/r": a reference is {"from": NODE, "pointer": POINTER}, two strings`,
			`node "a": field "input/s/0": a reference is {"from": NODE, "pointer": POINTER}, two strings`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := dag.Parse([]byte(tc.doc))
			if err == nil {
				t.Fatalf("Parse accepted %s", tc.doc)
			}
			if w != nil {
				t.Errorf("Parse returned a Work Order with an error")
			}
			if !errors.Is(err, dag.ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			var fe *dag.FieldError
			if !errors.As(err, &fe) {
				t.Errorf("error is not a *FieldError: %v", err)
			}
			equalLines(t, "problems", messages(err), tc.want)
		})
	}
}

func TestParseSyntaxError(t *testing.T) {
	_, err := dag.Parse([]byte(`{"workorder": nope}`))
	if err == nil || !strings.HasPrefix(err.Error(), "invalid JSON: ") || !errors.Is(err, dag.ErrInvalid) {
		t.Errorf("err = %v", err)
	}
}

func TestDuplicateNodeFields(t *testing.T) {
	_, err := dag.Parse([]byte(`{"workorder":"w","objective":"o","nodes":{"build":{"haygent":"x"},"build":{"haygent":"y"}}}`))
	var fe *dag.FieldError
	if !errors.As(err, &fe) || fe.Node != "build" || fe.Field != "" || fe.Msg != "duplicate node name" {
		t.Errorf("err = %#v", err)
	}
}

func TestFieldErrorText(t *testing.T) {
	for _, tc := range []struct {
		e    dag.FieldError
		want string
	}{
		{dag.FieldError{Node: "test", Field: "needs", Msg: `unknown node "buidl"`}, `node "test": field "needs": unknown node "buidl"`},
		{dag.FieldError{Field: "nodes", Msg: "no nodes"}, `field "nodes": no nodes`},
		{dag.FieldError{Node: "a", Msg: "m"}, `node "a": m`},
		{dag.FieldError{Msg: "m"}, `m`},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
	if dag.Problems(nil) != nil {
		t.Error("Problems(nil) != nil")
	}
}

func TestPointers(t *testing.T) {
	for _, tc := range []struct {
		p    string
		want []string
		err  string
	}{
		{"", nil, ""},
		{"/", []string{""}, ""},
		{"/a/b", []string{"a", "b"}, ""},
		{"/a~1b/c~0d/~01", []string{"a/b", "c~d", "~1"}, ""},
		{"a", nil, `must be empty or start with "/"`},
		{"/a~", nil, `"~" must be followed by "0" or "1"`},
		{"/a~2", nil, `"~" must be followed by "0" or "1"`},
	} {
		got, err := dag.ParsePointer(tc.p)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("ParsePointer(%q) error = %v, want %q", tc.p, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParsePointer(%q) = %q, %v; want %q", tc.p, got, err, tc.want)
		}
	}

	doc := map[string]any{"a": []any{int64(1), map[string]any{"b/c": "x"}}, "": "empty"}
	for _, tc := range []struct {
		p    string
		want any
		err  error
	}{
		{"", doc, nil},
		{"/", "empty", nil},
		{"/a/0", int64(1), nil},
		{"/a/1/b~1c", "x", nil},
		{"/a/2", nil, dag.ErrNoValue},
		{"/a/01", nil, dag.ErrNoValue},
		{"/a/-", nil, dag.ErrNoValue},
		{"/z", nil, dag.ErrNoValue},
		{"/a/0/x", nil, dag.ErrNoValue},
		{"a", nil, dag.ErrInvalid},
	} {
		got, err := dag.Lookup(doc, tc.p)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("Lookup(%q) error = %v, want %v", tc.p, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Lookup(%q) = %v, %v; want %v", tc.p, got, err, tc.want)
		}
	}
}

func TestResolve(t *testing.T) {
	w := mustParse(t, `{"workorder":"w","objective":"o","nodes":{
		"a":{"haygent":"echo"},
		"b":{"haygent":"echo","needs":["a"],"input":{"lit":[1,"x"],"v":{"from":"a","pointer":"/value"},
			"deep":[{"t":{"from":"a","pointer":"/trail/1"}}],"all":{"from":"a","pointer":""}}}}}`)
	outputs := map[string]any{"a": map[string]any{"value": "hi", "trail": []any{"a", "b"}}}
	lookup := func(from, pointer string) (any, error) { return dag.Lookup(outputs[from], pointer) }
	got, err := w.Nodes["b"].Resolve(lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"lit": []any{int64(1), "x"}, "v": "hi", "deep": []any{map[string]any{"t": "b"}},
		"all": outputs["a"],
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Resolve = %#v\nwant %#v", got, want)
	}
	// The Work Order is left as it was.
	if _, ok := w.Nodes["b"].Input()["v"].(map[string]any); !ok {
		t.Error("Resolve changed the node's input")
	}
	outputs["a"] = map[string]any{"value": "hi"}
	_, err = w.Nodes["b"].Resolve(lookup)
	if err == nil || !errors.Is(err, dag.ErrNoValue) || !strings.HasPrefix(err.Error(), `node "b": input/deep/0/t: pointer "/trail/1"`) {
		t.Errorf("Resolve error = %v", err)
	}
}

// An input that is one reference as a whole must resolve to an object.
func TestResolveWholeInputMustBeAnObject(t *testing.T) {
	w := mustParse(t, `{"workorder":"w","objective":"o","nodes":{
		"a":{"haygent":"echo"},
		"b":{"haygent":"echo","needs":["a"],"input":{"from":"a","pointer":"/value"}}}}`)
	lookup := func(from, pointer string) (any, error) {
		return dag.Lookup(map[string]any{"value": "hi", "obj": map[string]any{"k": "v"}}, pointer)
	}
	if got, err := w.Nodes["b"].Resolve(lookup); err == nil || !strings.Contains(err.Error(), "gives a string, not an object") {
		t.Fatalf("Resolve = %v, %v; want an error", got, err)
	}
	in := w.Nodes["b"].Input()
	in["pointer"] = "/obj"
	if _, err := w.Nodes["b"].Resolve(lookup); err == nil {
		t.Fatal("changing the map Input returned changed the node: want a copy")
	}
	if err := w.Nodes["b"].SetInput(in); err != nil {
		t.Fatal(err)
	}
	got, err := w.Nodes["b"].Resolve(lookup)
	if err != nil || !reflect.DeepEqual(got, map[string]any{"k": "v"}) {
		t.Fatalf("Resolve = %v, %v; want the object", got, err)
	}
}

package dag_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/dag"
)

func TestValidateErrors(t *testing.T) {
	// doc wraps the inside of "nodes" and an optional outcome.
	doc := func(nodes, outcome string) string {
		s := `{"workorder":"w","objective":"o","nodes":{` + nodes + `}`
		if outcome != "" {
			s += `,"outcome":` + outcome
		}
		return s + `}`
	}
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"valid", doc(`
			"a":{"haygent":"echo","input":{"value":1,"trail":[]}},
			"b":{"haygent":"../x/echo","needs":["a"],"input":{"value":{"from":"a","pointer":"/value"},"trail":{"from":"a","pointer":"/trail"}}},
			"c":{"haygent":"deep","needs":["a","b"],"input":{"all":{"from":"b","pointer":""},"v":{"from":"a","pointer":"/trail"}}},
			"d":{"haygent":"echo","needs":["c"],"input":{"n":{"from":"c","pointer":"/meta/items/7/name"}}}`,
			`{"require":["d","b"]}`), nil},
		{"empty nodes", doc(``, ``), []string{`field "nodes": no nodes`}},
		{"unknown need", doc(`"build":{"haygent":"echo"},"test":{"haygent":"echo","needs":["buidl"]}`, ``),
			[]string{`node "test": field "needs": unknown node "buidl"`}},
		{"self dependency", doc(`"a":{"haygent":"echo","needs":["a"]}`, ``),
			[]string{`node "a": field "needs": depends on itself`}},
		{"need listed twice", doc(`"a":{"haygent":"echo"},"b":{"haygent":"echo","needs":["a","a"]}`, ``),
			[]string{`node "b": field "needs": "a" listed twice`}},
		{"cycle of three", doc(`
			"c":{"haygent":"echo","needs":["b"]},
			"b":{"haygent":"echo","needs":["a"]},
			"a":{"haygent":"echo","needs":["c"]}`, ``),
			[]string{`node "a": field "needs": cycle a -> c -> b -> a`}},
		{"cycle of two, after an entry", doc(`
			"entry":{"haygent":"echo"},
			"y":{"haygent":"echo","needs":["entry","x"]},
			"x":{"haygent":"echo","needs":["y"]}`, ``),
			[]string{`node "x": field "needs": cycle x -> y -> x`}},
		{"two cycles through one node", doc(`
			"a":{"haygent":"echo","needs":["c","b"]},
			"b":{"haygent":"echo","needs":["a"]},
			"c":{"haygent":"echo","needs":["a"]}`, ``),
			[]string{`node "a": field "needs": cycle a -> b -> a`, `node "a": field "needs": cycle a -> c -> a`}},
		{"disjoint cycles and a self dependency", doc(`
			"q":{"haygent":"echo","needs":["p"]},
			"p":{"haygent":"echo","needs":["q","p"]},
			"n3":{"haygent":"echo","needs":["n1"]},
			"n1":{"haygent":"echo","needs":["n2"]},
			"n2":{"haygent":"echo","needs":["n3"]}`, ``),
			[]string{
				`node "p": field "needs": depends on itself`,
				`node "n1": field "needs": cycle n1 -> n2 -> n3 -> n1`,
				`node "p": field "needs": cycle p -> q -> p`,
			}},
		{"every node of a group on a reported cycle", doc(`
			"a":{"haygent":"echo","needs":["b"]},
			"b":{"haygent":"echo","needs":["c","e"]},
			"c":{"haygent":"echo","needs":["d"]},
			"d":{"haygent":"echo","needs":["a"]},
			"e":{"haygent":"echo","needs":["a"]}`, ``),
			[]string{`node "a": field "needs": cycle a -> b -> c -> d -> a`, `node "a": field "needs": cycle a -> b -> e -> a`}},
		{"from not in needs", doc(`
			"a":{"haygent":"echo"},"lint":{"haygent":"echo"},
			"b":{"haygent":"echo","needs":["a"],"input":{"v":{"from":"lint","pointer":"/value"},"w":{"from":"nobody","pointer":"/value"}}}`, ``),
			[]string{
				`node "b": field "input/v": "from" node "lint" is not in needs`,
				`node "b": field "input/w": "from" node "nobody" is not in needs`,
			}},
		{"pointer does not parse", doc(`
			"a":{"haygent":"echo"},
			"b":{"haygent":"echo","needs":["a"],"input":{"v":{"from":"a","pointer":"value"},"w":[{"from":"a","pointer":"/a~2"}]}}`, ``),
			[]string{
				`node "b": field "input/v": pointer "value": must be empty or start with "/"`,
				`node "b": field "input/w/0": pointer "/a~2": "~" must be followed by "0" or "1"`,
			}},
		{"pointer not declared", doc(`
			"a":{"haygent":"echo"},
			"b":{"haygent":"echo","needs":["a"],"input":{"v":{"from":"a","pointer":"/valeu"},"o":{"from":"a","pointer":"/output/value"}}},
			"c":{"haygent":"echo","needs":["a"],"input":{"t":{"from":"a","pointer":"/trail/x"},"u":{"from":"a","pointer":"/value/x"}}},
			"d":{"haygent":"empty"},
			"e":{"haygent":"echo","needs":["d"],"input":{"v":{"from":"d","pointer":"/value"}}}`, ``),
			[]string{
				`node "b": field "input/o": pointer "/output/value": not declared by the output contract of node "a"`,
				`node "b": field "input/v": pointer "/valeu": not declared by the output contract of node "a"`,
				`node "c": field "input/t": pointer "/trail/x": not declared by the output contract of node "a"`,
				`node "c": field "input/u": pointer "/value/x": not declared by the output contract of node "a"`,
				`node "e": field "input/v": pointer "/value": not declared by the output contract of node "d"`,
			}},
		{"unknown Haygent", doc(`
			"a":{"haygent":"../haygents/nope"},
			"b":{"haygent":"../haygents/nope","needs":["a"],"input":{"v":{"from":"a","pointer":"/value"}}}`, ``),
			[]string{
				`node "a": field "haygent": no valid Haygent package at "../haygents/nope": no such package`,
				`node "b": field "haygent": no valid Haygent package at "../haygents/nope": no such package`,
			}},
		{"outcome", doc(`"a":{"haygent":"echo"}`, `{"require":["a","pakc","a"]}`),
			[]string{
				`field "outcome/require": unknown node "pakc"`,
				`field "outcome/require": "a" listed twice`,
			}},
		{"everything at once", doc(`
			"b":{"haygent":"nope","needs":["a","zz","b"],"input":{"x":{"from":"c","pointer":"x"}}},
			"a":{"haygent":"echo","needs":["b"]}`, `{"require":["q"]}`),
			[]string{
				`node "b": field "haygent": no valid Haygent package at "nope": no such package`,
				`node "b": field "needs": unknown node "zz"`,
				`node "b": field "needs": depends on itself`,
				`node "b": field "input/x": pointer "x": must be empty or start with "/"`,
				`node "b": field "input/x": "from" node "c" is not in needs`,
				`node "a": field "needs": cycle a -> b -> a`,
				`field "outcome/require": unknown node "q"`,
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := mustParse(t, tc.doc)
			err := w.Validate(fakeResolver())
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, dag.ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			equalLines(t, "problems", messages(err), tc.want)
			if len(dag.Problems(err)) != len(tc.want) {
				t.Errorf("Problems found %d, want %d", len(dag.Problems(err)), len(tc.want))
			}
		})
	}
}

func TestValidateCycleLimit(t *testing.T) {
	// 40 pairs that need each other: 32 cycles are listed, and the 16
	// nodes of the other 8 are counted.
	var b strings.Builder
	b.WriteString(`{"workorder":"w","objective":"o","nodes":{`)
	for i := range 40 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"a%02d":{"haygent":"echo","needs":["b%02d"]},"b%02d":{"haygent":"echo","needs":["a%02d"]}`, i, i, i, i)
	}
	b.WriteString("}}")
	got := messages(mustParse(t, b.String()).Validate(nil))
	var want []string
	for i := range 32 {
		want = append(want, fmt.Sprintf(`node "a%02d": field "needs": cycle a%02d -> b%02d -> a%02d`, i, i, i, i))
	}
	want = append(want, `field "nodes": 16 more nodes lie on cycles not listed here`)
	equalLines(t, "problems", got, want)
}

func TestValidateNilResolver(t *testing.T) {
	w := mustParse(t, `{"workorder":"w","objective":"o","nodes":{
		"a":{"haygent":"nope"},"b":{"haygent":"nope","needs":["a"],"input":{"v":{"from":"a","pointer":"/anything"}}}}}`)
	if err := w.Validate(nil); err != nil {
		t.Errorf("Validate(nil): %v", err)
	}
}

// countingResolver counts the calls per path.
type countingResolver struct {
	calls map[string]int
	next  dag.Resolver
}

func (c countingResolver) Haygent(path string) (dag.HaygentInfo, error) {
	c.calls[path]++
	return c.next.Haygent(path)
}

func TestValidateResolvesOnce(t *testing.T) {
	w := mustParse(t, `{"workorder":"w","objective":"o","nodes":{
		"a":{"haygent":"echo"},"b":{"haygent":"echo","needs":["a"],"input":{"v":{"from":"a","pointer":"/value"}}},
		"c":{"haygent":"nope"},"d":{"haygent":"nope"}}}`)
	r := countingResolver{map[string]int{}, fakeResolver()}
	_ = w.Validate(r)
	if r.calls["echo"] != 1 || r.calls["nope"] != 1 {
		t.Errorf("calls = %v, want one per path", r.calls)
	}
}

func TestValidateNilOutput(t *testing.T) {
	w := mustParse(t, `{"workorder":"w","objective":"o","nodes":{
		"a":{"haygent":"x"},"b":{"haygent":"x","needs":["a"],"input":{"all":{"from":"a","pointer":""},"v":{"from":"a","pointer":"/v"}}}}}`)
	err := w.Validate(resolverFunc(func(string) (dag.HaygentInfo, error) { return dag.HaygentInfo{Dir: "/x"}, nil }))
	equalLines(t, "problems", messages(err), []string{
		`node "b": field "input/v": pointer "/v": not declared by the output contract of node "a"`,
	})
}

type resolverFunc func(string) (dag.HaygentInfo, error)

func (f resolverFunc) Haygent(p string) (dag.HaygentInfo, error) { return f(p) }

func TestSchemaResolverPaths(t *testing.T) {
	base := t.TempDir()
	var dirs []string
	r := dag.SchemaResolver(base, func(dir string) (map[string]any, error) {
		dirs = append(dirs, dir)
		return map[string]any{}, nil
	})
	abs := filepath.Join(base, "abs", "pkg")
	for _, tc := range []struct{ path, want string }{
		{"../haygents/echo", filepath.Join(filepath.Dir(base), "haygents", "echo")},
		{"pkgs/./a/", filepath.Join(base, "pkgs", "a")},
		{filepath.ToSlash(abs), abs},
	} {
		info, err := r.Haygent(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Dir != tc.want || dirs[len(dirs)-1] != tc.want {
			t.Errorf("Haygent(%q): Dir %q, load(%q), want %q", tc.path, info.Dir, dirs[len(dirs)-1], tc.want)
		}
		if !filepath.IsAbs(info.Dir) {
			t.Errorf("Dir %q is not absolute", info.Dir)
		}
	}
	if _, err := r.Haygent(""); err == nil {
		t.Error("empty path accepted")
	}
	failing := dag.SchemaResolver(base, func(string) (map[string]any, error) { return nil, errNoPackage })
	if _, err := failing.Haygent("x"); !errors.Is(err, errNoPackage) {
		t.Errorf("load error not wrapped: %v", err)
	}
}

func TestSchemaResolverOutput(t *testing.T) {
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"tree":  map[string]any{"type": "string"},
			"a/b":   true,
			"~":     map[string]any{},
			"obj":   map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{}}, "additionalProperties": map[string]any{}},
			"list":  map[string]any{"type": "array", "items": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{}}}},
			"tuple": map[string]any{"prefixItems": []any{map[string]any{}, map[string]any{"properties": map[string]any{"p": map[string]any{}}}}, "items": false},
			"old":   map[string]any{"items": []any{map[string]any{}}},
			"any":   map[string]any{"items": true},
			"pat":   map[string]any{"patternProperties": map[string]any{".*": map[string]any{}}},
			"ref":   map[string]any{"$ref": "#/$defs/x"},
		},
		"allOf": []any{map[string]any{"properties": map[string]any{"fromAll": map[string]any{}}}},
		"anyOf": []any{true, map[string]any{"properties": map[string]any{"fromAny": map[string]any{"properties": map[string]any{"y": map[string]any{}}}}}},
		"oneOf": []any{map[string]any{"properties": map[string]any{"fromOne": map[string]any{}}}},
	}
	r := dag.SchemaResolver("/", func(string) (map[string]any, error) { return schema, nil })
	info, err := r.Haygent("p")
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{
		"":              true,
		"/tree":         true,
		"/output/tree":  false,
		"/tree/x":       false,
		"/a~1b":         true,
		"/a/b":          false,
		"/~0":           true,
		"/obj/x":        true,
		"/obj/other":    false,
		"/list/0/n":     true,
		"/list/12/n":    true,
		"/list/01/n":    false,
		"/list/-/n":     false,
		"/list/x":       false,
		"/list/0/m":     false,
		"/tuple/0":      true,
		"/tuple/1/p":    true,
		"/tuple/2":      false,
		"/old/0":        true,
		"/old/1":        false,
		"/any/3":        true,
		"/any/3/x":      false,
		"/pat/x":        false,
		"/ref/x":        false,
		"/fromAll":      true,
		"/fromAny/y":    true,
		"/fromOne":      true,
		"/missing":      false,
		"tree":          false,
		"/a~2":          false,
		"/tree/":        false,
		"/fromAny/y/z/": false,
	} {
		if got := info.Output(p); got != want {
			t.Errorf("Output(%q) = %v, want %v", p, got, want)
		}
	}
}

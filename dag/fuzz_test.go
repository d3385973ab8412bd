package dag_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
)

// FuzzParse: Parse never panics; what it accepts, Validate (with a fake
// resolver and without one), Waves, Upstream, Downstream, Refs and Dot
// handle without panicking, Waves covers every node exactly once when
// Validate(nil) finds nothing, and the stored form round-trips.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "fixtures", "workorders", "*.json"))
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	for _, s := range []string{
		example, diamond, chain,
		`{"workorder":"w","objective":"o","nodes":{"a":{"haygent":"echo","needs":["a","b"]},"b":{"haygent":"deep","needs":["a"],"input":{"x":[{"from":"a","pointer":"/value/~1"}]}}},"outcome":{"require":["b","zz"]}}`,
		`{"workorder":"w","objective":"o","nodes":{"a":{"haygent":"x","haygent":"y"}}}`,
		`{"workorder":"w","objective":"o","nodes":{"a":{"haygent":"echo","input":{"v":1e400}}}}`,
		`{"workorder":"w","objective":"o","nodes":{}}`,
		`{"workorder":"w","objective":"o","nodes":{"a":{"haygent":"echo","input":{"v":{"from":"a","pointer":7}}}}}`,
		`[`, `{`, `{"nodes":{"":{}}}`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := dag.Parse(data)
		if err != nil {
			if w != nil {
				t.Fatal("a Work Order and an error")
			}
			if len(dag.Problems(err)) == 0 {
				t.Fatalf("error without a FieldError: %v", err)
			}
			return
		}
		if len(w.Order) != len(w.Nodes) {
			t.Fatalf("Order %q vs %d nodes", w.Order, len(w.Nodes))
		}
		_ = w.Validate(fakeResolver())
		graphErr := w.Validate(nil)
		waves := w.Waves()
		_ = w.Dot(map[string]string{})
		for _, name := range w.Order {
			_ = w.Upstream(name)
			_ = w.Downstream(name)
			_ = w.Nodes[name].Refs()
		}
		if graphErr == nil {
			var all []string
			for _, wave := range waves {
				all = append(all, wave...)
			}
			slices.Sort(all)
			order := slices.Sorted(slices.Values(w.Order))
			if !slices.Equal(all, order) {
				t.Fatalf("valid graph, but Waves %q does not cover %q", waves, w.Order)
			}
		}
		// A directory or pin is stored or resolved by the scheduler
		// before the object is made: here, a made-up tree.
		for _, n := range w.Nodes {
			if ws := n.Workspace; ws != nil && (ws.Dir != "" || ws.Pin != "") {
				ws.Tree = cas.Sum(cas.DagCBOR, []byte("tree of "+ws.Dir+ws.Pin))
			}
		}
		o, err := w.Object(pkgCIDs(w))
		if err != nil {
			t.Fatal(err)
		}
		enc, err := cas.Marshal(o)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		var back dag.Object
		if err := cas.Unmarshal(enc, &back); err != nil {
			t.Fatalf("Unmarshal: %v", err)
		}
		if !reflect.DeepEqual(back, o) {
			t.Fatalf("round trip differs")
		}
		// A stored workspace is read back only along a needs edge, as
		// the graph check demands.
		if _, err := dag.FromObject(back); err != nil && graphErr == nil {
			t.Fatalf("FromObject: %v", err)
		}
	})
}

package dag_test

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/haygent/hg/dag"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// diamond: top fans out to left and right, which fan in to bottom.
const diamond = `{"workorder":"diamond","objective":"fan out, fan in","nodes":{
	"top":{"haygent":"echo"},
	"right":{"haygent":"echo","needs":["top"]},
	"left":{"haygent":"echo","needs":["top"]},
	"bottom":{"haygent":"echo","needs":["right","left","left"]}}}`

const chain = `{"workorder":"chain","objective":"one after another","nodes":{
	"d":{"haygent":"echo","needs":["c"]},
	"c":{"haygent":"echo","needs":["b"]},
	"b":{"haygent":"echo","needs":["a"]},
	"a":{"haygent":"echo"}}}`

func TestWaves(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      [][]string
	}{
		{"diamond", diamond, [][]string{{"top"}, {"left", "right"}, {"bottom"}}},
		{"chain", chain, [][]string{{"a"}, {"b"}, {"c"}, {"d"}}},
		{"independent", `{"workorder":"w","objective":"o","nodes":{"z":{"haygent":"h"},"y":{"haygent":"h"},"x":{"haygent":"h","needs":["y"]}}}`,
			[][]string{{"y", "z"}, {"x"}}},
		{"cycle left out", `{"workorder":"w","objective":"o","nodes":{
			"s":{"haygent":"h"},"a":{"haygent":"h","needs":["s","b"]},"b":{"haygent":"h","needs":["a"]},
			"after":{"haygent":"h","needs":["b"]},"self":{"haygent":"h","needs":["self"]},"t":{"haygent":"h","needs":["s","ghost"]}}}`,
			[][]string{{"s"}, {"t"}}},
		{"none", `{"workorder":"w","objective":"o","nodes":{}}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustParse(t, tc.doc).Waves(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Waves = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestUpstreamDownstream(t *testing.T) {
	w := mustParse(t, diamond)
	for _, tc := range []struct {
		node     string
		up, down []string
	}{
		{"top", nil, []string{"bottom", "left", "right"}},
		{"left", []string{"top"}, []string{"bottom"}},
		{"bottom", []string{"left", "right"}, nil},
		{"ghost", nil, nil},
	} {
		if got := w.Upstream(tc.node); !reflect.DeepEqual(got, tc.up) {
			t.Errorf("Upstream(%q) = %q, want %q", tc.node, got, tc.up)
		}
		if got := w.Downstream(tc.node); !reflect.DeepEqual(got, tc.down) {
			t.Errorf("Downstream(%q) = %q, want %q", tc.node, got, tc.down)
		}
	}
	if got, want := mustParse(t, chain).Downstream("a"), []string{"b", "c", "d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("chain Downstream(a) = %q, want %q", got, want)
	}
	cyc := mustParse(t, `{"workorder":"w","objective":"o","nodes":{"a":{"haygent":"h","needs":["b"]},"b":{"haygent":"h","needs":["a"]},"c":{"haygent":"h","needs":["b"]}}}`)
	if got, want := cyc.Downstream("a"), []string{"b", "c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("cycle Downstream(a) = %q, want %q (without a)", got, want)
	}
}

func TestDotGolden(t *testing.T) {
	w := mustParse(t, diamond)
	for _, tc := range []struct {
		file   string
		states map[string]string
	}{
		{"diamond-pending.dot", nil},
		{"diamond-mixed.dot", map[string]string{"top": dag.Done, "left": dag.Failed, "right": dag.Active, "bottom": dag.Blocked}},
		{"diamond-other.dot", map[string]string{"top": dag.Concluded, "left": dag.Ready, "right": dag.Cancelled, "bottom": "weird"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got := w.Dot(tc.states)
			if again := w.Dot(tc.states); again != got {
				t.Fatal("Dot is not deterministic")
			}
			path := filepath.Join("testdata", tc.file)
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("Dot:\n%s\nwant (%s):\n%s", got, path, want)
			}
		})
	}
}

func TestCanMove(t *testing.T) {
	states := []string{dag.Pending, dag.Ready, dag.Active, dag.Concluded, dag.Done, dag.Blocked, dag.Failed, dag.Cancelled, dag.Rewritten, dag.Deleted}
	allowed := map[[2]string]bool{
		{dag.Pending, dag.Ready}:       true,
		{dag.Pending, dag.Blocked}:     true,
		{dag.Pending, dag.Cancelled}:   true,
		{dag.Ready, dag.Active}:        true,
		{dag.Ready, dag.Blocked}:       true,
		{dag.Ready, dag.Cancelled}:     true,
		{dag.Active, dag.Concluded}:    true,
		{dag.Active, dag.Failed}:       true,
		{dag.Active, dag.Cancelled}:    true,
		{dag.Concluded, dag.Done}:      true,
		{dag.Concluded, dag.Failed}:    true,
		{dag.Concluded, dag.Cancelled}: true,
	}
	for _, from := range append(states, "", "unknown") {
		for _, to := range append(states, "", "unknown") {
			if got, want := dag.CanMove(from, to), allowed[[2]string{from, to}]; got != want {
				t.Errorf("CanMove(%q, %q) = %v, want %v", from, to, got, want)
			}
		}
	}
	wantFinal := map[string]bool{dag.Done: true, dag.Blocked: true, dag.Failed: true, dag.Cancelled: true, dag.Rewritten: true, dag.Deleted: true}
	for _, s := range append(states, "unknown") {
		if got := dag.Final(s); got != wantFinal[s] {
			t.Errorf("Final(%q) = %v", s, got)
		}
		// A final state is one no move leaves.
		leaves := false
		for _, to := range states {
			leaves = leaves || dag.CanMove(s, to)
		}
		if s != "unknown" && leaves == dag.Final(s) {
			t.Errorf("state %q: Final = %v but a move leaves it = %v", s, dag.Final(s), leaves)
		}
	}
	if dag.Pending != "pending" || dag.Ready != "ready" || dag.Active != "active" || dag.Concluded != "concluded" ||
		dag.Done != "done" || dag.Blocked != "blocked" || dag.Failed != "failed" || dag.Cancelled != "cancelled" ||
		dag.Rewritten != "rewritten" || dag.Deleted != "deleted" {
		t.Error("state names changed")
	}
}

// TestCanReopen: only the moves a recorded event makes take a final state
// back: a regression (done -> failed), what rests on it (done ->
// blocked), and a person's rewritten or deleted; nothing reaches done, and
// nothing leaves deleted.
func TestCanReopen(t *testing.T) {
	states := []string{dag.Pending, dag.Ready, dag.Active, dag.Concluded, dag.Done, dag.Blocked, dag.Failed, dag.Cancelled, dag.Rewritten, dag.Deleted}
	for _, from := range append(states, "", "unknown") {
		for _, to := range append(states, "", "unknown") {
			want := false
			switch {
			case from == "" || from == "unknown" || from == dag.Deleted:
			case to == dag.Deleted:
				want = true
			case to == dag.Rewritten:
				want = from != dag.Rewritten
			case from == dag.Done:
				want = to == dag.Failed || to == dag.Blocked
			}
			if got := dag.CanReopen(from, to); got != want {
				t.Errorf("CanReopen(%q, %q) = %v, want %v", from, to, got, want)
			}
			if dag.CanReopen(from, to) && dag.CanMove(from, to) {
				t.Errorf("%s -> %s is in both tables", from, to)
			}
		}
	}
	for _, s := range states {
		if got, want := dag.Stops(s), s == dag.Failed || s == dag.Blocked || s == dag.Rewritten || s == dag.Deleted; got != want {
			t.Errorf("Stops(%q) = %v, want %v", s, got, want)
		}
	}
}

package dag_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
)

// aTree is the CID of some hg/tree@1; aRaw that of a raw block.
var (
	aTree = cas.Sum(cas.DagCBOR, []byte("a tree"))
	aRaw  = cas.Sum(cas.Raw, []byte("a file's bytes"))
)

func TestWorkspaceParse(t *testing.T) {
	w := mustParse(t, `{"workorder":"w","objective":"x","nodes":{
		"fix":{"haygent":"../haygents/echo","workspace":"../workspaces/calc"},
		"pinned":{"haygent":"../haygents/echo","workspace":{"pin":"calc"}},
		"stored":{"haygent":"../haygents/echo","workspace":{"tree":"`+aTree.String()+`"}},
		"build":{"haygent":"../haygents/echo","needs":["fix"],"workspace":{"from":"fix"}},
		"bare":{"haygent":"../haygents/echo"}}}`)
	want := map[string]*dag.Workspace{
		"fix":    {Dir: "../workspaces/calc"},
		"pinned": {Pin: "calc"},
		"stored": {Tree: aTree},
		"build":  {From: "fix"},
		"bare":   nil,
	}
	for name, ws := range want {
		if got := w.Nodes[name].Workspace; !reflect.DeepEqual(got, ws) {
			t.Errorf("node %s: workspace %+v, want %+v", name, got, ws)
		}
	}
	if err := w.Validate(fakeResolver()); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

// TestWorkspaceRefused: every malformed workspace, and every upstream
// workspace that does not follow a needs edge, is refused before anything
// runs, naming the node and the field.
func TestWorkspaceRefused(t *testing.T) {
	node := func(ws string) string {
		return `{"workorder":"w","objective":"x","nodes":{"up":{"haygent":"../haygents/echo"},
			"other":{"haygent":"../haygents/echo"},
			"n":{"haygent":"../haygents/echo","needs":["up"],"workspace":` + ws + `}}}`
	}
	for _, tc := range []struct{ ws, want string }{
		{`""`, `node "n": field "workspace": a directory must not be empty`},
		{`"a\u0000b"`, `node "n": field "workspace": a directory must not hold NUL`},
		{`null`, `node "n": field "workspace": want a directory, {"tree": CID}, {"pin": NAME} or {"from": NODE}`},
		{`3`, `node "n": field "workspace": want a directory`},
		{`["up"]`, `node "n": field "workspace": want a directory`},
		{`{}`, `node "n": field "workspace": want exactly one of "tree", "pin" and "from"`},
		{`{"from":"up","pin":"calc"}`, `node "n": field "workspace": want exactly one of "tree", "pin" and "from"`},
		{`{"from":"up","pointer":"/x"}`, `node "n": field "workspace/pointer": unknown field`},
		{`{"from":3}`, `node "n": field "workspace/from": want a string`},
		{`{"from":"../up"}`, `node "n": field "workspace/from": node name "../up"`},
		{`{"tree":"not-a-cid"}`, `node "n": field "workspace/tree": "not-a-cid" is not a CID`},
		{`{"tree":"` + aRaw.String() + `"}`, `node "n": field "workspace/tree": ` + aRaw.String() + ` is not a tree`},
		{`{"pin":"a/../b"}`, `node "n": field "workspace/pin": pin name "a/../b"`},
		{`{"pin":""}`, `node "n": field "workspace/pin": `},
	} {
		_, err := dag.Parse([]byte(node(tc.ws)))
		if err == nil || !strings.Contains(strings.Join(messages(err), "\n"), tc.want) {
			t.Errorf("workspace %s: %v, want %q", tc.ws, messages(err), tc.want)
		}
	}
	for _, tc := range []struct{ ws, want string }{
		// Along no edge: a workspace flows only from a node the node waits
		// for, as a reference's value does.
		{`{"from":"other"}`, `node "n": field "workspace/from": "other" is not in needs: a workspace flows only along a needs edge`},
		{`{"from":"n"}`, `node "n": field "workspace/from": a node cannot start from its own workspace`},
		{`{"from":"ghost"}`, `node "n": field "workspace/from": unknown node "ghost"`},
	} {
		w := mustParse(t, node(tc.ws))
		if err := w.Validate(nil); err == nil || !strings.Contains(strings.Join(messages(err), "\n"), tc.want) {
			t.Errorf("workspace %s: %v, want %q", tc.ws, messages(err), tc.want)
		}
	}
}

// TestWorkspaceObject: the stored Work Order names each workspace by a
// tree or an upstream node; a directory or pin not yet stored is refused;
// an order without workspaces keeps its bytes; and a stored order whose
// workspace does not follow a needs edge, or is not one thing, is refused
// when read back.
func TestWorkspaceObject(t *testing.T) {
	doc := `{"workorder":"w","objective":"x","nodes":{
		"fix":{"haygent":"../haygents/echo","workspace":"../workspaces/calc"},
		"build":{"haygent":"../haygents/echo","needs":["fix"],"workspace":{"from":"fix"}}}}`
	w := mustParse(t, doc)
	if _, err := w.Object(pkgCIDs(w)); err == nil || !strings.Contains(err.Error(), `node "fix": workspace "../workspaces/calc" has not been stored as a tree`) {
		t.Fatalf("Object with a directory not stored: %v", err)
	}
	w.Nodes["fix"].Workspace.Tree = aTree
	o, err := w.Object(pkgCIDs(w))
	if err != nil {
		t.Fatal(err)
	}
	if ws := o.Nodes[1].Workspace; o.Nodes[1].Name != "fix" || ws == nil || ws.Tree == nil || ws.Tree.Cid != aTree || ws.From != "" {
		t.Fatalf("stored fix workspace %+v, want the tree only", ws)
	}
	if ws := o.Nodes[0].Workspace; ws == nil || ws.Tree != nil || ws.From != "fix" {
		t.Fatalf("stored build workspace %+v, want from fix only", ws)
	}
	data, err := cas.Marshal(&o)
	if err != nil {
		t.Fatal(err)
	}
	var back dag.Object
	if err := cas.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	w2, err := dag.FromObject(back)
	if err != nil {
		t.Fatal(err)
	}
	if got := w2.Nodes["fix"].Workspace; !reflect.DeepEqual(got, &dag.Workspace{Tree: aTree}) {
		t.Errorf("read back fix: %+v", got)
	}
	if got := w2.Nodes["build"].Workspace; !reflect.DeepEqual(got, &dag.Workspace{From: "fix"}) {
		t.Errorf("read back build: %+v", got)
	}

	// No workspace: nothing of it is stored, so an order keeps its CID.
	plain := mustParse(t, `{"workorder":"w","objective":"x","nodes":{"a":{"haygent":"h"}}}`)
	po, err := plain.Object(pkgCIDs(plain))
	if err != nil {
		t.Fatal(err)
	}
	pdata, err := cas.Marshal(&po)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(pdata, []byte("workspace")) {
		t.Error("an order without workspaces stores a workspace key")
	}

	// A stored order is read as strictly as a file: a hostile one cannot
	// hand a node the workspace of a node it does not wait for.
	for _, tc := range []struct {
		name string
		edit func(*dag.Object)
		want string
	}{
		{"from off the edges", func(o *dag.Object) { o.Nodes[0].Needs = []string{} }, `field "workspace/from": "fix" is not in needs`},
		{"tree and from", func(o *dag.Object) { o.Nodes[0].Workspace.Tree = &cas.Link{Cid: aTree} }, `want exactly one of "tree" and "from"`},
		{"neither", func(o *dag.Object) { o.Nodes[0].Workspace.From = "" }, `want exactly one of "tree" and "from"`},
		{"raw tree", func(o *dag.Object) { o.Nodes[1].Workspace.Tree = &cas.Link{Cid: aRaw} }, "is not a tree"},
	} {
		var bad dag.Object
		if err := cas.Unmarshal(data, &bad); err != nil {
			t.Fatal(err)
		}
		tc.edit(&bad)
		if _, err := dag.FromObject(bad); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: FromObject: %v, want %q", tc.name, err, tc.want)
		}
	}
}

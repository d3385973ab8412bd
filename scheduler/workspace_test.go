package scheduler_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
	"github.com/rogpeppe/go-internal/txtar"
)

// wsPackage writes a builtin-only package into dir/name: the roundtrip
// fixture with the given permissions and spine, and one gate that a file
// was digested.
func wsPackage(t *testing.T, dir, name, grants, spine, file string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.CopyFS(p, os.DirFS("../fixtures/haygents/roundtrip")); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"permissions.json": `{"grants": [` + grants + `, "network:none", "secret:none", "publish:none", "spend:none"], "deny": ["read:file:secret.txt"]}`,
		"spine/spine.json": `{"steps": ` + spine + `}`,
		"gates/gates.json": `{"gates": [{"id": "SEEN", "evidence": "digest", "subject": "file:` + file + `", "predicate": "ev.size > 0",
			"on_missing": "halt", "on_stale": "halt", "on_invalid": "halt", "on_contradictory": "halt", "on_timeout": "halt"}]}`,
	}
	for f, content := range files {
		if err := os.WriteFile(filepath.Join(p, f), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// wsOrder is a writer node that starts from the directory ws and writes
// out.txt, and a reader node that starts from the writer's final
// workspace and digests out.txt. The writer may not read secret.txt.
type wsOrder struct {
	dir, ws, file string
}

func newWSOrder(t *testing.T) *wsOrder {
	t.Helper()
	dir := t.TempDir()
	writer := wsPackage(t, dir, "writer", `"read:file:**", "write:file:out.txt"`,
		`[{"id": "write", "kind": "builtin", "op": "write_file", "args": {"path": "out.txt", "template": "written by the writer\n"}},
		  {"id": "digest", "kind": "builtin", "op": "digest", "args": {"file": "data.txt"}}]`, "data.txt")
	reader := wsPackage(t, dir, "reader", `"read:file:**"`,
		`[{"id": "digest", "kind": "builtin", "op": "digest", "args": {"file": "out.txt"}}]`, "out.txt")
	ws := filepath.Join(dir, "ws")
	for p, content := range map[string]string{
		"data.txt":                 "the data\n",
		"secret.txt":               "no Haygent here may read this\n",
		"sub/deep.txt":             "deep\n",
		".haygent/keys/runner.key": "a key planted in the workspace\n",
	} {
		mustWrite(t, filepath.Join(ws, p), content)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	wo := map[string]any{
		"workorder": "edges", "objective": "hand a workspace along an edge",
		"nodes": map[string]any{
			"writer": map[string]any{"haygent": writer, "workspace": "ws"},
			"reader": map[string]any{"haygent": reader, "needs": []string{"writer"}, "workspace": map[string]any{"from": "writer"}},
		},
	}
	data, err := json.Marshal(wo)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "edges.json")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return &wsOrder{dir: dir, ws: ws, file: file}
}

func mustWrite(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// treeFiles lists the paths of the files and symlinks of tree c, with the
// content of each file.
func treeFiles(t *testing.T, st cas.Store, c cid.Cid) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	var walk func(c cid.Cid, rel string)
	walk = func(c cid.Cid, rel string) {
		tree, err := cas.LoadTree(ctx, st, c)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range tree.Entries {
			p := path.Join(rel, e.Name)
			switch e.Kind {
			case cas.KindDir:
				walk(e.Link.Cid, p)
			case cas.KindFile:
				var b strings.Builder
				if _, err := cas.ReadFile(ctx, st, e.Link.Cid, &b, nil); err != nil {
					t.Fatal(err)
				}
				out[p] = b.String()
			default:
				out[p] = "-> symlink"
			}
		}
	}
	walk(c, "")
	return out
}

func nodeReceipt(t *testing.T, st cas.Store, rec *scheduler.Record, name string) *ledger.Receipt {
	t.Helper()
	for _, n := range rec.Nodes {
		if n.Name == name {
			if n.Receipt == nil {
				t.Fatalf("node %s (%s) has no receipt", name, n.State)
			}
			r, err := ledger.LoadReceipt(context.Background(), st, n.Receipt.Cid)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
	}
	t.Fatalf("no node %s", name)
	return nil
}

func verifyRunID(t *testing.T, st cas.Store, run string) *scheduler.RunVerification {
	t.Helper()
	ctx := context.Background()
	root, err := st.GetRef(ctx, scheduler.RefNamespace, run)
	if err != nil {
		t.Fatal(err)
	}
	v, err := scheduler.VerifyRun(ctx, st, root, []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func placeDetail(v *scheduler.RunVerification, node string) (bool, string) {
	for _, n := range v.Nodes {
		if n.Node != node {
			continue
		}
		for _, c := range n.Checks {
			if c.Name == scheduler.CheckPlace {
				return c.OK, c.Detail
			}
		}
	}
	return false, "no place check"
}

// TestWorkspaceEdge: a node starts from the directory its Work Order
// names, stored as a tree when the run starts (a store planted in it left
// out, and changes made to the directory afterwards never seen); the
// next starts from exactly the final workspace the first node's accepted
// receipt records, which holds what the first wrote and nothing its read
// grants kept from it. The run verifies, each node's workspace rebuilt
// from the stored trees.
func TestWorkspaceEdge(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	o := newWSOrder(t)
	plan, err := scheduler.Load(o.file)
	if err != nil {
		t.Fatal(err)
	}
	s := scheduler.New(scheduler.Options{Store: scheduler.Shared{Store: st}, Key: key})
	id, err := s.Start(ctx, plan, "")
	if err != nil {
		t.Fatal(err)
	}
	// Changed after the start: the run works from the stored tree.
	mustWrite(t, filepath.Join(o.ws, "data.txt"), "changed after the run started\n")
	rec, err := s.Execute(ctx, plan, id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != scheduler.StatusDone {
		t.Fatalf("status %s: %s", rec.Status, rec.Reason)
	}

	_, obj, err := loadObject(ctx, st, rec)
	if err != nil {
		t.Fatal(err)
	}
	given := obj["writer"].Workspace
	if given == nil || given.Tree == nil || obj["reader"].Workspace == nil || obj["reader"].Workspace.From != "writer" {
		t.Fatalf("stored workspaces: writer %+v, reader %+v", given, obj["reader"].Workspace)
	}
	stored := treeFiles(t, st, given.Tree.Cid)
	if stored["data.txt"] != "the data\n" || stored["secret.txt"] == "" || stored["link"] == "" {
		t.Errorf("the stored workspace %v is not the directory as it was at the start", stored)
	}
	for p := range stored {
		if strings.HasPrefix(p, ".haygent") {
			t.Errorf("the stored workspace holds %s: a store was stored", p)
		}
	}

	w := nodeReceipt(t, st, rec, "writer")
	start, final := treeFiles(t, st, w.Workspace.Cid), treeFiles(t, st, w.FinalWorkspace.Cid)
	if start["data.txt"] != "the data\n" || start["out.txt"] != "" {
		t.Errorf("the writer started from %v", start)
	}
	if final["out.txt"] != "written by the writer\n" {
		t.Errorf("the writer's final workspace %v lacks what it wrote", final)
	}
	if _, ok := final["secret.txt"]; ok {
		t.Error("the writer's final workspace holds a file its read grants deny")
	}
	r := nodeReceipt(t, st, rec, "reader")
	if r.Workspace.Cid != w.FinalWorkspace.Cid {
		t.Errorf("the reader started from %s, the writer's accepted receipt records %s", r.Workspace.Cid, w.FinalWorkspace.Cid)
	}
	if r.Status != ledger.StatusPass {
		t.Errorf("reader %s", r.Status)
	}

	v := verifyRunID(t, st, id)
	if !v.OK() {
		node, c := v.FirstFailure()
		t.Fatalf("the run does not verify: %s %+v", node, c)
	}
	if ok, detail := placeDetail(v, "reader"); !ok || !strings.Contains(detail, "on workspace "+w.FinalWorkspace.Cid.String()) {
		t.Errorf("reader's place: %v %s", ok, detail)
	}
}

// loadObject returns the stored Work Order's nodes by name.
func loadObject(ctx context.Context, st cas.Store, rec *scheduler.Record) (dag.Object, map[string]dag.ObjectNode, error) {
	obj, _, err := scheduler.LoadWorkOrder(ctx, st, rec)
	m := map[string]dag.ObjectNode{}
	for _, n := range obj.Nodes {
		m[n.Name] = n
	}
	return obj, m, err
}

// TestWorkspaceMemo: the memo key holds the tree a node starts from. The
// same trees do no work again; a changed file runs the node that starts
// from it and the one that starts from its final workspace, whose tree
// changed with it.
func TestWorkspaceMemo(t *testing.T) {
	st := memstore.New()
	o := newWSOrder(t)
	runOnce := func() (*scheduler.Scheduler, *scheduler.Record) {
		plan, err := scheduler.Load(o.file)
		if err != nil {
			t.Fatal(err)
		}
		return execute(t, plan, scheduler.Options{Store: scheduler.Shared{Store: st}})
	}
	if s, rec := runOnce(); rec.Status != scheduler.StatusDone || s.Ran() != 2 {
		t.Fatalf("first run: %s, ran %d", rec.Status, s.Ran())
	}
	s, rec := runOnce()
	if rec.Status != scheduler.StatusDone || s.Ran() != 0 {
		t.Fatalf("the same trees again: %s, ran %d, want 0", rec.Status, s.Ran())
	}
	mustWrite(t, filepath.Join(o.ws, "sub/deep.txt"), "deeper\n")
	s, rec = runOnce()
	if rec.Status != scheduler.StatusDone || s.Ran() != 2 {
		t.Fatalf("a changed file: %s, ran %d, want both nodes again", rec.Status, s.Ran())
	}
	if !verifyRunID(t, st, rec.Run).OK() {
		t.Fatal("the run does not verify")
	}
	// A file the writer may not read changes nothing it sees, but it is
	// in the tree the node is given: the writer runs again, and the
	// reader, whose tree is the same, is a memo hit.
	mustWrite(t, filepath.Join(o.ws, "secret.txt"), "another secret\n")
	s, rec = runOnce()
	if rec.Status != scheduler.StatusDone || s.Ran() != 1 {
		t.Fatalf("a file the writer cannot see: %s, ran %d, want 1", rec.Status, s.Ran())
	}
	for _, n := range rec.Nodes {
		if n.Name == "reader" && !n.Memo {
			t.Error("the reader, on the same tree, did not come from the memo cache")
		}
	}
	if v := verifyRunID(t, st, rec.Run); !v.OK() {
		node, c := v.FirstFailure()
		t.Fatalf("the run does not verify: %s %+v", node, c)
	}
}

// swapEngine runs one node on a tree of its own choosing (or none),
// signing with the trusted key.
type swapEngine struct {
	scheduler.Local
	node   string
	tree   cid.Cid
	blocks []cas.Block
}

func (e *swapEngine) Invoke(ctx context.Context, inv scheduler.Invocation) (scheduler.Outcome, error) {
	if inv.Node == e.node {
		// As an engine elsewhere gets it: what the invocation says, no
		// more.
		inv = scheduler.Invocation{Run: inv.Run, Node: inv.Node, Package: inv.Package, PackageBlocks: inv.PackageBlocks,
			Input: inv.Input, Upstream: inv.Upstream, Workspace: e.tree, WorkspaceBlocks: e.blocks}
	}
	return e.Local.Invoke(ctx, inv)
}

// TestWorkspaceEngineOtherTree: a trusted engine that runs a node on
// another tree than the one it was handed (a tree the upstream did not
// leave, or no tree at all) gets no acceptance, though its receipt is a
// signed PASS: downstream work starts only from what was accepted.
func TestWorkspaceEngineOtherTree(t *testing.T) {
	ctx := context.Background()
	o := newWSOrder(t)
	plan, err := scheduler.Load(o.file)
	if err != nil {
		t.Fatal(err)
	}
	// Another tree: the directory with out.txt already there, as if the
	// writer had written it, stored in the run's store.
	other := t.TempDir()
	mustWrite(t, filepath.Join(other, "out.txt"), "not what the writer wrote\n")
	mustWrite(t, filepath.Join(other, "data.txt"), "the data\n")
	for _, tc := range []struct {
		name, node string
		empty      bool
	}{
		{"reader on another tree", "reader", false},
		{"writer on another tree", "writer", false},
		{"reader in an empty directory", "reader", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := memstore.New()
			eng := &swapEngine{Local: *localEngine(plan, key), node: tc.node}
			if !tc.empty {
				if eng.tree, err = cas.PutTree(ctx, st, other, nil); err != nil {
					t.Fatal(err)
				}
				for c := range allBlocks(t, st) {
					b, err := st.Get(ctx, c)
					if err != nil {
						t.Fatal(err)
					}
					eng.blocks = append(eng.blocks, cas.NewBlock(c.Type(), b))
				}
			}
			_, rec := startAndExecute(t, plan, scheduler.Options{Store: scheduler.Shared{Store: st}, Engine: eng})
			for _, n := range rec.Nodes {
				switch {
				case n.Name == tc.node && (n.State != dag.Failed || !strings.Contains(n.Reason, "same work: the receipt's workspace is")):
					t.Errorf("%s: %s %q, want failed on the same-work check", n.Name, n.State, n.Reason)
				case n.Name == tc.node && !tc.empty && nodeReceipt(t, st, rec, n.Name).Status != ledger.StatusPass:
					t.Errorf("%s: the engine's receipt is no PASS: the test proves nothing", n.Name)
				case n.Name == "reader" && tc.node == "writer" && n.State != dag.Blocked:
					t.Errorf("reader: %s, want blocked below the refused writer", n.State)
				}
			}
		})
	}
}

func allBlocks(t *testing.T, st cas.Store) map[cid.Cid]bool {
	t.Helper()
	m := map[cid.Cid]bool{}
	if err := st.AllKeys(context.Background(), func(c cid.Cid, _ int) error { m[c] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestWorkspaceVerifyRunTampered: a stored run whose Work Order is made
// to give a node another workspace than its receipt ran on does not
// verify, whoever wrote the record: the place check rebuilds each
// node's workspace from the stored Work Order and trees.
func TestWorkspaceVerifyRunTampered(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	o := newWSOrder(t)
	plan, err := scheduler.Load(o.file)
	if err != nil {
		t.Fatal(err)
	}
	_, rec := execute(t, plan, scheduler.Options{Store: scheduler.Shared{Store: st}})
	if rec.Status != scheduler.StatusDone {
		t.Fatalf("status %s", rec.Status)
	}
	w := nodeReceipt(t, st, rec, "writer")
	for _, tc := range []struct {
		name, node string
		edit       func(n *dag.ObjectNode)
		want       string
	}{
		{"writer given another tree", "writer", func(n *dag.ObjectNode) { n.Workspace.Tree = &cas.Link{Cid: w.FinalWorkspace.Cid} },
			"the receipt's workspace is " + w.Workspace.Cid.String()},
		{"reader given a tree, not the edge", "reader", func(n *dag.ObjectNode) {
			n.Workspace = &dag.ObjectWorkspace{Tree: &cas.Link{Cid: w.Workspace.Cid}}
		}, "what the work order gives the node is " + w.Workspace.Cid.String()},
		{"reader given none", "reader", func(n *dag.ObjectNode) { n.Workspace = nil }, "what the work order gives the node is " + haygent.EmptyTree().String()},
		{"writer given a tree not stored", "writer", func(n *dag.ObjectNode) {
			n.Workspace.Tree = &cas.Link{Cid: cas.Sum(cas.DagCBOR, []byte("no such tree"))}
		}, "cannot be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj, _, err := scheduler.LoadWorkOrder(ctx, st, rec)
			if err != nil {
				t.Fatal(err)
			}
			for i := range obj.Nodes {
				if obj.Nodes[i].Name == tc.node {
					tc.edit(&obj.Nodes[i])
				}
			}
			data, err := cas.Marshal(&obj)
			if err != nil {
				t.Fatal(err)
			}
			b := cas.NewBlock(cas.DagCBOR, data)
			forged := *rec
			forged.WorkOrder = cas.Link{Cid: b.CID()}
			blocks, root, err := scheduler.EncodeRecord(&forged)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Put(ctx, append(blocks, b)...); err != nil {
				t.Fatal(err)
			}
			v, err := scheduler.VerifyRun(ctx, st, root, []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ok, detail := placeDetail(v, tc.node)
			if ok || !strings.Contains(detail, tc.want) || v.OK() {
				t.Errorf("place of %s: %v %q, want it to fail naming %q", tc.node, ok, detail, tc.want)
			}
		})
	}
}

// TestWorkspaceResume: a node done in an earlier process hands its final
// workspace on from the store: a retry of the node below it starts from
// it.
func TestWorkspaceResume(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	o := newWSOrder(t)
	plan, err := scheduler.Load(o.file)
	if err != nil {
		t.Fatal(err)
	}
	failing := &failNode{Local: *localEngine(plan, key), node: "reader"}
	id, rec := startAndExecute(t, plan, scheduler.Options{Store: scheduler.Shared{Store: st}, Engine: failing})
	if rec.Status != scheduler.StatusHalted {
		t.Fatalf("status %s, want halted", rec.Status)
	}
	s := scheduler.New(scheduler.Options{Store: scheduler.Shared{Store: st}, Key: key, Retry: true})
	rec, err = s.Execute(ctx, plan, id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != scheduler.StatusDone || s.Ran() != 1 {
		t.Fatalf("retry: %s, ran %d, want done running the reader only", rec.Status, s.Ran())
	}
	if w, r := nodeReceipt(t, st, rec, "writer"), nodeReceipt(t, st, rec, "reader"); r.Workspace.Cid != w.FinalWorkspace.Cid {
		t.Errorf("the retried reader started from %s, not the writer's final workspace %s", r.Workspace.Cid, w.FinalWorkspace.Cid)
	}
	if v := verifyRunID(t, st, id); !v.OK() {
		node, c := v.FirstFailure()
		t.Fatalf("the run does not verify: %s %+v", node, c)
	}
}

// failNode fails one node's invocation, once.
type failNode struct {
	scheduler.Local
	node string
	done bool
}

func (f *failNode) Invoke(ctx context.Context, inv scheduler.Invocation) (scheduler.Outcome, error) {
	if inv.Node == f.node && !f.done {
		f.done = true
		return scheduler.Outcome{}, errors.New("the engine lost the node")
	}
	return f.Local.Invoke(ctx, inv)
}

// TestWorkspaceStartRefuses: a workspace that cannot be had stops the run
// before anything runs or is stored: a directory that is not one, a pin
// the store lacks or that names no tree, a tree the store does not hold
// whole.
func TestWorkspaceStartRefuses(t *testing.T) {
	ctx := context.Background()
	o := newWSOrder(t)
	write := func(ws any) string {
		data, err := os.ReadFile(o.file)
		if err != nil {
			t.Fatal(err)
		}
		var wo map[string]any
		if err := json.Unmarshal(data, &wo); err != nil {
			t.Fatal(err)
		}
		wo["nodes"].(map[string]any)["writer"].(map[string]any)["workspace"] = ws
		data, _ = json.Marshal(wo)
		p := filepath.Join(o.dir, "variant.json")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, err := scheduler.Load(write("missing")); err == nil || !strings.Contains(err.Error(), `node "writer": field "workspace": `+filepath.Join(o.dir, "missing")+": no such file or directory") {
		t.Errorf("a missing directory: %v", err)
	}
	if _, err := scheduler.Load(write("ws/data.txt")); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file for a directory: %v", err)
	}
	st := memstore.New()
	file, _, err := cas.PutFile(ctx, st, strings.NewReader("a file, not a tree"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetPin(ctx, "afile", file); err != nil {
		t.Fatal(err)
	}
	missing := cas.Sum(cas.DagCBOR, []byte("no such tree"))
	for _, tc := range []struct {
		ws   any
		want string
	}{
		{map[string]any{"pin": "nopin"}, `node "writer": workspace {"pin": "nopin"}: no such pin in the store`},
		{map[string]any{"pin": "afile"}, `node "writer": workspace {"pin": "afile"}: `},
		{map[string]any{"tree": missing.String()}, "not found"},
	} {
		plan, err := scheduler.Load(write(tc.ws))
		if err != nil {
			t.Fatal(err)
		}
		s := scheduler.New(scheduler.Options{Store: scheduler.Shared{Store: st}, Key: key})
		_, err = s.Start(ctx, plan, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("workspace %v: %v, want %q", tc.ws, err, tc.want)
		}
		if refs, _ := st.Refs(ctx, scheduler.RefNamespace); len(refs) != 0 {
			t.Errorf("workspace %v: a run was recorded", tc.ws)
		}
	}
}

// TestWorkspaceViewAgrees: what the scheduler rebuilds of a tree as a
// node sees it is what the runtime stores as the node's workspace when
// it works on that tree written out: nested and pruned directories,
// denied files, empty directories, symlinks, modes and a directory named
// like a store.
func TestWorkspaceViewAgrees(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	for p, content := range map[string]string{
		"src/a.go": "a", "src/secret/k.pem": "key", "src/secret/ok.txt": "ok", "src/.HayGent/keys/x": "x",
		"docs/readme.md": "docs", "top.txt": "top", ".env": "env", "src/sub/deeper/d.txt": "d",
	} {
		mustWrite(t, filepath.Join(src, p), content)
	}
	for _, d := range []string{"src/empty", "src/sub/emptier", "docs/empty"} {
		if err := os.MkdirAll(filepath.Join(src, d), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(src, "src/a.go"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../top.txt", filepath.Join(src, "src/link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(src, "docs/etc")); err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	tree, err := cas.PutTree(ctx, st, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	bare, err := cas.PutTree(ctx, st, src, &cas.TreeOptions{Include: func(p string, _ bool) bool { return p != "src/.HayGent" }})
	if err != nil {
		t.Fatal(err)
	}
	for _, grants := range []string{
		`"read:file:src/**"`,
		`"read:file:**"`,
		`"read:file:src/*", "read:file:top.txt"`,
		`"read:file:docs/readme.md"`,
		`"read:file:nothing/here"`,
	} {
		t.Run(grants, func(t *testing.T) {
			pkgDir := wsPackage(t, t.TempDir(), "seer", grants, `[{"id": "noop", "kind": "builtin", "op": "noop"}]`, "x")
			if err := os.WriteFile(filepath.Join(pkgDir, "permissions.json"), []byte(`{"grants": [`+grants+`, "network:none", "secret:none", "publish:none", "spend:none"],
				"deny": ["read:file:**/*.pem", "read:file:.env"]}`), 0o644); err != nil {
				t.Fatal(err)
			}
			pkg, err := haygent.Load(pkgDir)
			if err != nil {
				t.Fatal(err)
			}
			want, err := scheduler.WorkspaceView(ctx, func(c cid.Cid) ([]byte, error) { return st.Get(ctx, c) }, tree, pkg.Permissions)
			if err != nil {
				t.Fatal(err)
			}
			// hg get writes no store's directory out: the tree is
			// written without it, and the directory made beside it.
			out := filepath.Join(t.TempDir(), "ws")
			if err := cas.GetTree(ctx, st, bare, out, nil); err != nil {
				t.Fatal(err)
			}
			mustWrite(t, filepath.Join(out, "src/.HayGent/keys/x"), "x")
			res, err := haygent.Run(ctx, pkg, map[string]any{}, haygent.Options{Store: memstore.New(), Key: key, Workspace: out})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Receipt.Workspace.Cid; got != want {
				t.Errorf("the runtime stored %s, the scheduler rebuilds %s", got, want)
			}
		})
	}
}

// TestWorkspaceRealWork: a Go module's failing tests repaired by the
// gotest Haygent, then vetted and built, then tested again, each node on
// the tree the one before it left: the Work Order of the demo, from a
// pinned tree.
func TestWorkspaceRealWork(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go vet, go build and go test, confined")
	}
	ctx := context.Background()
	ar, err := txtar.ParseFile("../fixtures/workspaces/calc.txtar")
	if err != nil {
		t.Fatal(err)
	}
	calc := t.TempDir()
	for _, f := range ar.Files {
		mustWrite(t, filepath.Join(calc, f.Name), string(f.Data))
	}
	st := memstore.New()
	tree, err := cas.PutTree(ctx, st, calc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetPin(ctx, "calc-src", tree); err != nil {
		t.Fatal(err)
	}
	plan, err := scheduler.Load(workorders + "calc-repair.json")
	if err != nil {
		t.Fatal(err)
	}
	adapter, err := haygent.LoadScript("../fixtures/scripts/gotest-fix.json")
	if err != nil {
		t.Fatal(err)
	}
	_, rec := execute(t, plan, scheduler.Options{Store: scheduler.Shared{Store: st}, Adapter: adapter})
	if rec.Status != scheduler.StatusDone {
		t.Fatalf("status %s: %s", rec.Status, rec.Reason)
	}
	fix, build, check := nodeReceipt(t, st, rec, "fix"), nodeReceipt(t, st, rec, "build"), nodeReceipt(t, st, rec, "check")
	if fix.Workspace.Cid != tree {
		t.Errorf("fix started from %s, not the pinned tree %s", fix.Workspace.Cid, tree)
	}
	if got := treeFiles(t, st, fix.FinalWorkspace.Cid)["factor.go"]; !strings.Contains(got, "Factor = 2") {
		t.Errorf("the repaired factor.go is %q", got)
	}
	if build.Workspace.Cid != fix.FinalWorkspace.Cid || check.Workspace.Cid != build.FinalWorkspace.Cid {
		t.Error("a node did not start from the final workspace of the one before it")
	}
	final := treeFiles(t, st, check.FinalWorkspace.Cid)
	if final["package.a"] == "" || !strings.Contains(final["factor.go"], "Factor = 2") {
		t.Errorf("the final tree lacks the build's archive or the repair: %v", keys(final))
	}
	if v := verifyRunID(t, st, rec.Run); !v.OK() {
		node, c := v.FirstFailure()
		t.Fatalf("the run does not verify: %s %+v", node, c)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

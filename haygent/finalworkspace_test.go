package haygent_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/verify"
	"github.com/ipfs/go-cid"
)

// treeFile returns the file link at name in the top level of tree c, or
// Undef.
func treeFile(t *testing.T, st cas.Store, c cid.Cid, name string) cid.Cid {
	t.Helper()
	tree, err := cas.LoadTree(context.Background(), st, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tree.Entries {
		if e.Name == name {
			return e.Link.Cid
		}
	}
	return cid.Undef
}

// execWriter is a package whose exec step writes made.txt (declared as
// its output) and whose gate reads the step's exit: the head of its chain
// is an evaluation of the gates that observed the workspace.
func execWriter(t *testing.T) string {
	return copyPackage(t, "roundtrip", map[string]string{
		"permissions.json": `{"grants": ["read:file:**", "write:file:made.txt", "run:command:make", "network:none", "secret:none", "publish:none", "spend:none"],
			"commands": {"make": ["sh", "-c", "echo made > made.txt"]}}`,
		"spine/spine.json": `{"steps": [{"id": "make", "kind": "exec", "command": "make", "outputs": ["made.txt"]}]}`,
		"gates/gates.json": `{"gates": [{"id": "MADE", "evidence": "exit", "subject": "step:make", "predicate": "ev.code == 0",
			"on_missing": "fail", "on_stale": "fail", "on_invalid": "fail", "on_contradictory": "halt", "on_timeout": "fail"}]}`,
	})
}

// TestFinalWorkspace: a receipt records the workspace as the run left it,
// which is what a Work Order hands on. It holds what the steps wrote;
// with no change applied it is the workspace the run started from; after
// a final evaluation of the gates it is the workspace that evaluation
// observed. A final workspace forged into a receipt and re-signed by a
// trusted key fails the receipt index; one that is no tree fails the
// canonical form.
func TestFinalWorkspace(t *testing.T) {
	ctx := context.Background()

	t.Run("unchanged", func(t *testing.T) {
		st := memstore.New()
		res := roundtripRun(t, st)
		r := res.Receipt
		if r.FinalWorkspace == nil || r.Workspace == nil || r.FinalWorkspace.Cid != r.Workspace.Cid {
			t.Fatalf("final workspace %v, start %v: a run that changed nothing leaves the workspace it found", r.FinalWorkspace, r.Workspace)
		}
		wantOK(t, verifyOf(t, st, res.ReceiptCID, trusted), verify.CheckIndex)

		// Forged: another tree, re-signed by the trusted key.
		other := putObject(t, st, &cas.TreeNode{Type: cas.TypeTree, Entries: []cas.TreeEntry{}})
		forged := loadReceipt(t, st, res.ReceiptCID)
		forged.FinalWorkspace = &cas.Link{Cid: other}
		if other == r.Workspace.Cid {
			t.Fatal("the start tree is the empty tree: the forgery would change nothing")
		}
		wantFailed(t, verifyOf(t, st, resign(t, st, forged, verifyKey), trusted), verify.CheckIndex,
			"no step applied a change", other.String())

		// Not a tree: a file object, re-signed.
		file, _, err := cas.PutFile(ctx, st, strings.NewReader("not a tree"), nil)
		if err != nil {
			t.Fatal(err)
		}
		forged = loadReceipt(t, st, res.ReceiptCID)
		forged.FinalWorkspace = &cas.Link{Cid: file}
		wantFailed(t, verifyOf(t, st, resign(t, st, forged, verifyKey), trusted), verify.CheckCanonical,
			"final workspace "+file.String(), "not an hg/tree@1")
	})

	t.Run("builtin write", func(t *testing.T) {
		st := memstore.New()
		write := `{"id": "w", "kind": "builtin", "op": "write_file", "args": {"path": "out.txt", "template": "new"}}`
		digest := `{"id": "d", "kind": "builtin", "op": "digest", "args": {"file": "out.txt"}}`
		res := runHaygent(t, st, freshness(t, `{"steps": [`+write+`,`+digest+`]}`), runOpts{files: map[string]string{"out.txt": "old"}, now: steppingClock()})
		r := res.Receipt
		if r.FinalWorkspace == nil || r.FinalWorkspace.Cid == r.Workspace.Cid {
			t.Fatalf("final workspace %v: the write is not in it", r.FinalWorkspace)
		}
		want, _, err := cas.PutFile(ctx, st, strings.NewReader("new"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := treeFile(t, st, r.FinalWorkspace.Cid, "out.txt"); got != want {
			t.Fatalf("out.txt in the final workspace is %s, want the written file %s", got, want)
		}
		if got := treeFile(t, st, r.Workspace.Cid, "out.txt"); got == want {
			t.Fatal("the start workspace already holds the written file")
		}
		wantOK(t, verifyOf(t, st, res.ReceiptCID, trusted), verify.CheckIndex)
	})

	t.Run("observed by the gates", func(t *testing.T) {
		st := memstore.New()
		res := runHaygent(t, st, execWriter(t), runOpts{files: map[string]string{"data.bin": "kept"}})
		r := res.Receipt
		if r.Status != ledger.StatusPass {
			t.Fatalf("status %s: %+v", r.Status, r.Halt)
		}
		ts, _ := chainOf(t, st, r)
		head := ts[len(ts)-1]
		var observed ledger.Evidence
		loadObject(t, st, head.Evidence[0].Cid, &observed)
		if head.Kind != "gates" || observed.Kind != ledger.KindWorkspace {
			t.Fatalf("head %s with %s evidence: the fixture no longer ends in an observation", head.Kind, observed.Kind)
		}
		if r.FinalWorkspace == nil || r.FinalWorkspace.Cid != observed.Workspace.Cid {
			t.Fatalf("final workspace %v, the gates observed %s", r.FinalWorkspace, observed.Workspace.Cid)
		}
		if treeFile(t, st, r.FinalWorkspace.Cid, "made.txt") == cid.Undef || treeFile(t, st, r.FinalWorkspace.Cid, "data.bin") == cid.Undef {
			t.Fatal("the final workspace lacks the step's output or the file it started with")
		}
		wantOK(t, verifyOf(t, st, res.ReceiptCID, trusted), verify.CheckIndex)

		// Forged: the start tree, as if the step's output had not been
		// made, re-signed by the trusted key.
		forged := loadReceipt(t, st, res.ReceiptCID)
		forged.FinalWorkspace = r.Workspace
		wantFailed(t, verifyOf(t, st, resign(t, st, forged, verifyKey), trusted), verify.CheckIndex,
			"head transition", observed.Workspace.Cid.String())
		// Dropped: a receipt without one (as made before it was recorded)
		// claims no final workspace and still verifies.
		forged = loadReceipt(t, st, res.ReceiptCID)
		forged.FinalWorkspace = nil
		wantOK(t, verifyOf(t, st, resign(t, st, forged, verifyKey), trusted))
	})

	t.Run("no workspace", func(t *testing.T) {
		st := memstore.New()
		pkg, err := haygent.Load(filepath.Join(fixtures, "haygents", "echo"))
		if err != nil {
			t.Fatal(err)
		}
		res, err := haygent.Run(ctx, pkg, map[string]any{"value": "x", "trail": []any{}}, haygent.Options{Store: st, Key: verifyKey, Now: fixedClock})
		if err != nil {
			t.Fatal(err)
		}
		r := res.Receipt
		if r.FinalWorkspace == nil || r.FinalWorkspace.Cid != haygent.EmptyTree() || r.Workspace.Cid != haygent.EmptyTree() {
			t.Fatalf("workspace %v, final %v: a run given none starts and ends with the empty tree %s", r.Workspace, r.FinalWorkspace, haygent.EmptyTree())
		}
		wantOK(t, verifyOf(t, st, res.ReceiptCID, trusted))
	})
}

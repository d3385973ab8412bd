package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/haygent/hg/cas/boltstore"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/internal/tamper"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
	"github.com/rogpeppe/go-internal/testscript"
)

// forge [-drop] RECEIPT NEWPIN STEP: forge the ledger of RECEIPT (a pin)
// as someone holding the store's runner key could: the data of the first
// evidence of step STEP gets a field "forged", every record above it is
// re-linked, the receipt is signed again with the runner key and pinned
// as NEWPIN. Nothing but a replay can tell. With -drop, that evidence
// block is deleted from the store instead, and NEWPIN names RECEIPT.
func cmdForgeLedger(ts *testscript.TestScript, neg bool, args []string) {
	drop := len(args) > 0 && args[0] == "-drop"
	if drop {
		args = args[1:]
	}
	if neg || len(args) != 3 {
		ts.Fatalf("usage: forge [-drop] RECEIPT NEWPIN STEP")
	}
	ctx := context.Background()
	st, err := boltstore.Open(storeDir(ts), nil)
	ts.Check(err)
	defer st.Close()
	c, err := resolve(ctx, st, args[0])
	ts.Check(err)
	if drop {
		l, err := ledger.LoadLedger(ctx, st, c)
		ts.Check(err)
		for ec, ev := range l.Evidence {
			if ev.Step == args[2] {
				ts.Check(st.Delete(ctx, ec))
				ts.Check(st.SetPin(ctx, args[1], c))
				return
			}
		}
		ts.Fatalf("no evidence of step %s in %s", args[2], c)
	}
	key, err := ledger.LoadKey(keyPath(storeDir(ts)))
	ts.Check(err)
	forged := false
	nc, err := tamper.Rewrite(ctx, st, c, key, func(typ string, n map[string]any) {
		if typ == ledger.TypeEvidence && n["step"] == args[2] && !forged {
			n["data"].(map[string]any)["forged"] = true
			forged = true
		}
	})
	ts.Check(err)
	if !forged {
		ts.Fatalf("no evidence of step %s in %s", args[2], c)
	}
	ts.Check(st.SetPin(ctx, args[1], nc))
}

// TestReplayRunRecord runs a small Work Order and replays it node by node,
// by run id and by the CID of its record.
func TestReplayRunRecord(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), ".haygent")
	hg := func(want int, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if got := run(ctx, append([]string{"--store", dir}, args...), strings.NewReader(""), &stdout, &stderr); got != want {
			t.Fatalf("hg %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), got, want, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	hg(0, "init")
	hg(0, "run", "--no-cache", "--run-id", "run-pipe", filepath.Join("..", "..", "fixtures", "workorders", "pipeline.json"))

	out := hg(0, "replay", "run-pipe")
	// Every node, upstream before downstream, each with its own input.
	var order []string
	for _, m := range regexp.MustCompile(`(?m)^node (\w+): 4/4 transitions agree$`).FindAllStringSubmatch(out, -1) {
		order = append(order, m[1])
	}
	if len(order) != 6 || order[0] != "seed" || order[4] != "merge" || order[5] != "summary" {
		t.Errorf("nodes replayed %v:\n%s", order, out)
	}
	if !strings.Contains(out, "\nrun: 24/24 transitions agree\n") {
		t.Errorf("no run total:\n%s", out)
	}

	st, err := boltstore.Open(dir, &boltstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_, rc, err := scheduler.LoadRecord(ctx, st, "run-pipe")
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Run         string `json:"run"`
		Record      string `json:"record"`
		Agree       int    `json:"agree"`
		Transitions int    `json:"transitions"`
		OK          bool   `json:"ok"`
		Nodes       []struct {
			Node, Receipt, Run string
			OK                 bool
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(hg(0, "replay", "--json", rc.String())), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Run != "run-pipe" || doc.Record != rc.String() || !doc.OK || doc.Agree != 24 || doc.Transitions != 24 || len(doc.Nodes) != 6 {
		t.Errorf("json %+v", doc)
	}
	for _, n := range doc.Nodes {
		if !n.OK || n.Run != "run-pipe/"+n.Node {
			t.Errorf("node %+v", n)
		}
	}
}

// TestReplayStoreUntouched: a replay writes nothing to the store it reads.
func TestReplayStoreUntouched(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), ".haygent")
	var stdout, stderr bytes.Buffer
	hg := func(args ...string) int {
		stdout.Reset()
		stderr.Reset()
		return run(ctx, append([]string{"--store", dir}, args...), strings.NewReader(""), &stdout, &stderr)
	}
	hg("init")
	input := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(input, []byte(`{"value": 7}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := hg("haygent", "run", filepath.Join("..", "..", "fixtures", "haygents", "echo"), "--input", input, "--pin", "e"); code != 0 {
		t.Fatalf("run: %d %s", code, stderr.String())
	}
	count := func() int {
		st, err := boltstore.Open(dir, &boltstore.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		n := 0
		if err := st.AllKeys(ctx, func(cid.Cid, int) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	if code := hg("replay", "e"); code != 0 {
		t.Fatalf("replay: %d %s %s", code, stdout.String(), stderr.String())
	}
	if after := count(); after != before {
		t.Errorf("%d blocks before the replay, %d after", before, after)
	}
}

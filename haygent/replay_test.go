package haygent_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/replay"
	"github.com/ipfs/go-cid"
)

var replayKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{11}, ed25519.SeedSize))

// replayRun runs a fixture Haygent on st with a real clock, as hg does,
// and returns the receipt.
func replayRun(t *testing.T, st cas.Store, haygentDir string, input map[string]any, script, ws string) *haygent.Result {
	t.Helper()
	pkg, err := haygent.Load(filepath.Join(fixtures, "haygents", haygentDir))
	if err != nil {
		t.Fatal(err)
	}
	var adapter haygent.Adapter
	if script != "" {
		if adapter, err = haygent.LoadScript(filepath.Join(fixtures, "scripts", script)); err != nil {
			t.Fatal(err)
		}
	}
	if input == nil {
		input = map[string]any{}
	}
	res, err := haygent.Run(context.Background(), pkg, cas.FromJSON(input).(map[string]any), haygent.Options{
		Store: st, Key: replayKey, Adapter: adapter, Workspace: ws,
	})
	if err != nil {
		t.Fatalf("run %s: %v", haygentDir, err)
	}
	return res
}

func countBlocks(t *testing.T, st cas.Store) int {
	t.Helper()
	n := 0
	if err := st.AllKeys(context.Background(), func(cid.Cid, int) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// mustAgree replays c and requires full agreement over want transitions.
func mustAgree(t *testing.T, st cas.Store, c cid.Cid, want int, opts replay.Options) *replay.Result {
	t.Helper()
	before := countBlocks(t, st)
	res, err := replay.Run(context.Background(), st, c, opts)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if !res.OK() {
		t.Fatalf("replay diverges: %v (notes %q)", res.Divergence, res.Notes)
	}
	if res.Agree != want || res.Recorded != want || res.Replayed != want || res.Total() != want {
		t.Errorf("agree %d, recorded %d, replayed %d; want %d of each", res.Agree, res.Recorded, res.Replayed, want)
	}
	if after := countBlocks(t, st); after != before {
		t.Errorf("the replay added %d blocks to the store it read", after-before)
	}
	return res
}

func TestReplayBuiltin(t *testing.T) {
	st := memstore.New()
	res := replayRun(t, st, "echo", map[string]any{"value": "hello", "trail": []any{"a", "b"}}, "", "")
	// copy, trail, check, gates
	got := mustAgree(t, st, res.ReceiptCID, 4, replay.Options{})
	if got.Workspace != replay.WorkspaceSnapshot || got.Run != res.Receipt.Run || got.Haygent != "echo@1.0.0" {
		t.Errorf("result %+v", got)
	}
}

func TestReplaySlotsAndRepair(t *testing.T) {
	// claimer: a rejected try and an accepted one, then two repairs
	// through the same slot, the second stopped as a repeat.
	st := memstore.New()
	res := replayRun(t, st, "claimer", map[string]any{"task": "did the tests pass?"}, "claimer.json", "")
	if res.Receipt.Status != ledger.StatusHalt || res.Receipt.Repairs != 2 || len(res.Receipt.SlotCalls) < 3 {
		t.Fatalf("the fixture changed: %s, %d repairs, %d slot calls", res.Receipt.Status, res.Receipt.Repairs, len(res.Receipt.SlotCalls))
	}
	mustAgree(t, st, res.ReceiptCID, int(res.Receipt.Transitions), replay.Options{})
}

func TestReplayExecRepair(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles Go code; skipped in -short")
	}
	// gotest: a failing go test, a repair, a passing go test. The
	// workspace comes back from the receipt's snapshot.
	ws := t.TempDir()
	unpackTxtar(t, filepath.Join(fixtures, "workspaces", "calc.txtar"), ws)
	st := memstore.New()
	res := replayRun(t, st, "gotest", nil, "gotest-fix.json", ws)
	if res.Receipt.Status != ledger.StatusPass || res.Receipt.Repairs != 1 {
		t.Fatalf("the fixture changed: %s, %d repairs", res.Receipt.Status, res.Receipt.Repairs)
	}
	mustAgree(t, st, res.ReceiptCID, int(res.Receipt.Transitions), replay.Options{})
}

func TestReplayWorkspace(t *testing.T) {
	// roundtrip reads data.bin from its workspace.
	ws := t.TempDir()
	if err := os.CopyFS(ws, os.DirFS(filepath.Join(fixtures, "workspaces", "artifact"))); err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	res := replayRun(t, st, "roundtrip", nil, "", ws)
	mustAgree(t, st, res.ReceiptCID, 2, replay.Options{})

	// Given the same directory, the replay agrees and says where its
	// workspace came from; the directory is not touched.
	got := mustAgree(t, st, res.ReceiptCID, 2, replay.Options{Workspace: ws})
	if got.Workspace != replay.WorkspaceDir || len(got.Notes) == 0 || !strings.Contains(got.Notes[0], ws) {
		t.Errorf("workspace %q, notes %q", got.Workspace, got.Notes)
	}

	// Without the snapshot in the store, the replay runs in an empty
	// directory, says so, and diverges from the start: the workspace.
	ctx := context.Background()
	if err := st.Delete(ctx, res.Receipt.Workspace.Cid); err != nil {
		t.Fatal(err)
	}
	out, err := replay.Run(ctx, st, res.ReceiptCID, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if out.OK() || out.Workspace != replay.WorkspaceEmpty || len(out.Notes) == 0 || !strings.Contains(out.Notes[0], "--workspace") {
		t.Fatalf("result %+v", out)
	}
	if d := out.Divergence; d.Seq != -1 || d.Field != "workspace" || d.Recorded != res.Receipt.Workspace.String() {
		t.Errorf("divergence %v", d)
	}
	if out.Agree >= out.Total() {
		t.Errorf("%d/%d agree in an empty workspace", out.Agree, out.Total())
	}
}

var cidRE = regexp.MustCompile(`^bafy[a-z2-7]{50,}$`)

func TestReplayTamperedEvidence(t *testing.T) {
	st := memstore.New()
	res := replayRun(t, st, "echo", map[string]any{"value": "hello"}, "", "")
	forged := forgeLedger(t, st, res.ReceiptCID, func(typ string, n map[string]any) bool {
		if typ != ledger.TypeEvidence || n["step"] != "check" {
			return false
		}
		n["data"].(map[string]any)["a"] = strings.Repeat("0", 64)
		return true
	})
	out, err := replay.Run(context.Background(), st, forged, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := out.Divergence
	if out.OK() || d.Seq != 2 || d.Step != "check" || d.Field != "evidence #0 data" {
		t.Fatalf("divergence %v", d)
	}
	if !cidRE.MatchString(d.Recorded) || !cidRE.MatchString(d.Replayed) || d.Recorded == d.Replayed {
		t.Errorf("want two different CIDs: %q, %q", d.Recorded, d.Replayed)
	}
	// The other transitions still agree (the gate read the same evidence
	// position).
	if out.Agree != 3 || out.Total() != 4 {
		t.Errorf("%d/%d agree, want 3/4", out.Agree, out.Total())
	}
}

func TestReplaySwappedProposal(t *testing.T) {
	st := memstore.New()
	res := replayRun(t, st, "claimer", map[string]any{"task": "did the tests pass?"}, "claimer.json", "")
	other := putObject(t, st, &ledger.Packet{Type: ledger.TypePacket, Schema: haygent.AdjustSchema, Payload: map[string]any{"summary": "a forged summary"}})
	forged := forgeLedger(t, st, res.ReceiptCID, func(typ string, n map[string]any) bool {
		if typ != ledger.TypeSlotCall || n["verdict"] != "accepted" || n["try"] != int64(2) {
			return false // the first transition's second try, the only one
		}
		n["proposal"] = other
		return true
	})
	out, err := replay.Run(context.Background(), st, forged, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := out.Divergence
	if out.OK() || d.Seq != 0 || d.Step != "summarize" || d.Field != "slot call #1 proposal" || d.Recorded != other.String() {
		t.Fatalf("divergence %v", d)
	}
	if !cidRE.MatchString(d.Replayed) || d.Replayed == d.Recorded {
		t.Errorf("replayed %q", d.Replayed)
	}
}

func TestReplayProposalsRunOut(t *testing.T) {
	// The first transition loses its accepted call: the replay asks for a
	// second try the ledger does not hold next. A divergence, no panic.
	st := memstore.New()
	res := replayRun(t, st, "claimer", map[string]any{"task": "did the tests pass?"}, "claimer.json", "")
	forged := forgeLedger(t, st, res.ReceiptCID, func(typ string, n map[string]any) bool {
		if typ != ledger.TypeTransition || n["seq"] != int64(0) {
			return false
		}
		n["slot_calls"] = n["slot_calls"].([]any)[:1]
		return true
	})
	out, err := replay.Run(context.Background(), st, forged, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if out.OK() || out.Divergence.Seq != 0 || out.Divergence.Field != "slot calls" {
		t.Fatalf("divergence %v", out.Divergence)
	}
	if len(out.Notes) == 0 || !strings.Contains(strings.Join(out.Notes, "\n"), "the replay asks for") {
		t.Errorf("notes %q", out.Notes)
	}

	// Every recorded call dropped: the replay runs out at once.
	forged = forgeLedger(t, st, res.ReceiptCID, func(typ string, n map[string]any) bool {
		if typ != ledger.TypeTransition || len(n["slot_calls"].([]any)) == 0 {
			return false
		}
		n["slot_calls"] = []any{}
		return true
	})
	out, err = replay.Run(context.Background(), st, forged, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if out.OK() || !strings.Contains(strings.Join(out.Notes, "\n"), "records 0 slot call(s)") {
		t.Fatalf("divergence %v, notes %q", out.Divergence, out.Notes)
	}
}

func TestReplayMissingBlocks(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	res := replayRun(t, st, "echo", map[string]any{"value": 1}, "", "")

	// No such receipt: an error, not a finding about the ledger.
	if _, err := replay.Run(ctx, st, cas.Sum(cas.DagCBOR, []byte("nothing")), replay.Options{}); !errors.Is(err, cas.ErrNotFound) || errors.Is(err, replay.ErrIncomplete) {
		t.Errorf("unknown receipt: %v", err)
	}
	// A transition gone: the ledger is incomplete.
	if err := st.Delete(ctx, res.Receipt.Head.Cid); err != nil {
		t.Fatal(err)
	}
	if _, err := replay.Run(ctx, st, res.ReceiptCID, replay.Options{}); !errors.Is(err, replay.ErrIncomplete) {
		t.Errorf("missing transition: %v", err)
	}
	// The package gone: incomplete too, naming it.
	res = replayRun(t, st, "echo", map[string]any{"value": 2}, "", "")
	if err := st.Delete(ctx, res.Receipt.Package.Cid); err != nil {
		t.Fatal(err)
	}
	_, err := replay.Run(ctx, st, res.ReceiptCID, replay.Options{})
	if !errors.Is(err, replay.ErrIncomplete) || !strings.Contains(err.Error(), res.Receipt.Package.String()) {
		t.Errorf("missing package: %v", err)
	}
}

func TestReplayFixedClock(t *testing.T) {
	// A run recorded with one clock replays under another: time stamps
	// are not work.
	st := memstore.New()
	pkg, err := haygent.Load(filepath.Join(fixtures, "haygents", "echo"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := haygent.Run(context.Background(), pkg, map[string]any{"value": "x"}, haygent.Options{
		Store: st, Key: replayKey, Now: func() time.Time { return time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		t.Fatal(err)
	}
	mustAgree(t, st, res.ReceiptCID, 4, replay.Options{Now: time.Now})
}

// forgeLedger rewrites the ledger of a receipt as a forger holding the
// runner key would: edit may change any transition, evidence, gate result,
// slot call or packet (decoded as data-model maps), and last the receipt;
// every record above a changed one is re-linked, and the receipt is
// signed again.
func forgeLedger(t *testing.T, st cas.Store, receipt cid.Cid, edit func(typ string, node map[string]any) bool) cid.Cid {
	t.Helper()
	ctx := context.Background()
	ledgerTypes := map[string]bool{ledger.TypeTransition: true, ledger.TypeEvidence: true, ledger.TypeGate: true,
		ledger.TypeSlotCall: true, ledger.TypePacket: true}
	done := map[cid.Cid]cid.Cid{}
	var relinkValue func(v any) any
	var relink func(c cid.Cid) cid.Cid
	relink = func(c cid.Cid) cid.Cid {
		if n, ok := done[c]; ok {
			return n
		}
		done[c] = c
		if c.Type() != cas.DagCBOR {
			return c
		}
		data, err := st.Get(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		v, err := cas.DecodeNode(data)
		if err != nil {
			t.Fatal(err)
		}
		n, ok := v.(map[string]any)
		if !ok || !ledgerTypes[n["type"].(string)] {
			return c
		}
		n = relinkValue(n).(map[string]any)
		edit(n["type"].(string), n)
		enc, err := cas.EncodeNode(n)
		if err != nil {
			t.Fatal(err)
		}
		b := cas.NewBlock(cas.DagCBOR, enc)
		if err := st.Put(ctx, b); err != nil {
			t.Fatal(err)
		}
		done[c] = b.CID()
		return b.CID()
	}
	relinkValue = func(v any) any {
		switch x := v.(type) {
		case cid.Cid:
			return relink(x)
		case map[string]any:
			m := map[string]any{}
			for k, e := range x {
				m[k] = relinkValue(e)
			}
			return m
		case []any:
			s := make([]any, len(x))
			for i, e := range x {
				s[i] = relinkValue(e)
			}
			return s
		}
		return v
	}
	data, err := st.Get(ctx, receipt)
	if err != nil {
		t.Fatal(err)
	}
	v, err := cas.DecodeNode(data)
	if err != nil {
		t.Fatal(err)
	}
	n := relinkValue(v).(map[string]any)
	edit(ledger.TypeReceipt, n)
	delete(n, "signature")
	enc, err := cas.EncodeNode(n)
	if err != nil {
		t.Fatal(err)
	}
	var rc ledger.Receipt
	if err := cas.Unmarshal(enc, &rc); err != nil {
		t.Fatal(err)
	}
	if err := rc.Sign(replayKey, nil); err != nil {
		t.Fatal(err)
	}
	out, err := cas.Marshal(&rc)
	if err != nil {
		t.Fatal(err)
	}
	b := cas.NewBlock(cas.DagCBOR, out)
	if err := st.Put(ctx, b); err != nil {
		t.Fatal(err)
	}
	if b.CID() == receipt {
		t.Fatal("forgeLedger changed nothing")
	}
	return b.CID()
}

// invalidGate is a package whose only gate is INVALID (its predicate reads
// a field the evidence lacks), so the reason, which names the evidence's
// CID, differs between any two runs; the repair slot sees it.
var invalidGate = map[string]string{
	"haygent.manifest.json": `{"name": "invalid", "version": "1.0.0", "objective": "fail a gate whose reason names evidence",
 "stakes": "low", "repair_budget": 1, "timeouts": {"step": "10s", "run": "1m"},
 "slots": {"fix": {"prompt": "prompts/fix.md", "projection": ["/failures", "/adjustable"], "limit": 1, "verifier": {}, "fallback": "halt"}},
 "repair": {"slot": "fix", "gates": [], "rerun_from": "sum"}}`,
	"permissions.json":                 `{"grants": ["network:none", "secret:none", "publish:none", "spend:none"]}`,
	"contracts/input.schema.json":      `{"type": "object"}`,
	"contracts/output.schema.json":     `{"type": "object"}`,
	"contracts/adjustable.schema.json": `{"type": "object", "properties": {"n": {"type": "integer", "default": 0}}, "additionalProperties": false}`,
	"spine/spine.json":                 `{"steps": [{"id": "sum", "kind": "builtin", "op": "digest", "args": {"from": "/adjustable"}}]}`,
	"gates/gates.json": `{"gates": [{"id": "G", "evidence": "digest", "subject": "field:/adjustable", "predicate": "ev.nope == 1",
  "on_missing": "fail", "on_stale": "fail", "on_invalid": "fail", "on_contradictory": "halt", "on_timeout": "fail"}]}`,
	"prompts/fix.md": "Fix it.",
}

func TestReplayTimeInReasons(t *testing.T) {
	dir := t.TempDir()
	for name, content := range invalidGate {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pkg, err := haygent.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	res, err := haygent.Run(context.Background(), pkg, map[string]any{}, haygent.Options{
		Store: st, Key: replayKey, Adapter: haygent.NewScript(map[string][]json.RawMessage{"fix": {json.RawMessage(`{"n": 1}`)}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Receipt.Halt == nil || res.Receipt.Halt.Verdict != "INVALID" || res.Receipt.Repairs != 1 {
		t.Fatalf("receipt %+v", res.Receipt.Halt)
	}
	// sum, gates, repair, sum, gates
	mustAgree(t, st, res.ReceiptCID, 5, replay.Options{})
}

func TestReplayUpstreamRecheck(t *testing.T) {
	// Older runtimes re-checked upstream receipts before the first step
	// and recorded a refusal as an "upstream" transition and a HALT. This
	// runtime makes no such check (a Work Order's acceptance does): the
	// replay of such a ledger says so as its divergence, at seq 0, and
	// runs nothing.
	st := memstore.New()
	res := replayRun(t, st, "echo", map[string]any{"value": "x"}, "", "")
	r := res.Receipt
	ts, _ := chainOf(t, st, r)
	note := "upstream receipt " + cas.Sum(cas.DagCBOR, []byte("up")).String() + " failed its re-check: not the accepted receipt of its node"
	first := ts[0]
	first.Step, first.Kind, first.Status, first.Note = "upstream", "upstream", ledger.StepHalted, note
	first.Evidence, first.SlotCalls, first.Gates = []cas.Link{}, []cas.Link{}, []cas.Link{}
	r.Status, r.Halt, r.Output = ledger.StatusHalt, &ledger.Halt{Verdict: "UPSTREAM", Reason: note, LastEvidence: []cas.Link{}, Preserved: []ledger.Artifact{}}, nil
	old := relink(t, st, r, []ledger.Transition{first})
	got, err := replay.Run(context.Background(), st, old, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := got.Divergence
	if got.OK() || d == nil || d.Seq != 0 || d.Field != "upstream re-check" || d.Recorded != note || !strings.Contains(d.Replayed, "no longer re-checks") {
		t.Fatalf("replay of an upstream halt: %+v", d)
	}
	if got.Replayed != 0 || got.Recorded != 1 {
		t.Fatalf("recorded %d, replayed %d; want 1 and 0", got.Recorded, got.Replayed)
	}
}

func TestReplayShortLedger(t *testing.T) {
	// The receipt's head moved back one transition: the replay has one
	// the ledger lacks.
	st := memstore.New()
	res := replayRun(t, st, "echo", map[string]any{"value": "v"}, "", "")
	var head ledger.Transition
	data, err := st.Get(context.Background(), res.Receipt.Head.Cid)
	if err != nil {
		t.Fatal(err)
	}
	if err := cas.Unmarshal(data, &head); err != nil {
		t.Fatal(err)
	}
	forged := forgeLedger(t, st, res.ReceiptCID, func(typ string, n map[string]any) bool {
		if typ != ledger.TypeReceipt {
			return false
		}
		n["head"], n["transitions"] = head.Prior.Cid, int64(3)
		return true
	})
	out, err := replay.Run(context.Background(), st, forged, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := out.Divergence
	if out.Agree != 3 || out.Total() != 4 || d.Seq != 3 || d.Field != "transition" || d.Recorded != "none" || d.Replayed != "step gates (gates)" {
		t.Fatalf("%d/%d agree, divergence %v", out.Agree, out.Total(), d)
	}
}

func Example_replay() {
	ctx := context.Background()
	st := memstore.New()
	pkg, err := haygent.Load("../fixtures/haygents/echo")
	if err != nil {
		panic(err)
	}
	_, key, _ := ed25519.GenerateKey(nil)
	res, err := haygent.Run(ctx, pkg, map[string]any{"value": "hello"}, haygent.Options{Store: st, Key: key})
	if err != nil {
		panic(err)
	}
	// Later, or on another machine holding the same blocks:
	rep, err := replay.Run(ctx, st, res.ReceiptCID, replay.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d/%d transitions agree (ok: %v)\n", rep.Agree, rep.Total(), rep.OK())
	// Output: 4/4 transitions agree (ok: true)
}

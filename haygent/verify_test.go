package haygent_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/cas/storetest"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/verify"
	"github.com/ipfs/go-cid"
)

var (
	verifyKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize))
	strangerK = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{10}, ed25519.SeedSize))
	verifyPub = verifyKey.Public().(ed25519.PublicKey)
	trusted   = []ed25519.PublicKey{verifyPub}
)

func fixedClock() time.Time { return time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC) }

// steppingClock advances one second at every reading, so that every time
// stamp of a run differs and the order of the runtime's clock readings
// shows in the verdicts.
func steppingClock() func() time.Time {
	var n atomic.Int64
	return func() time.Time {
		return time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(n.Add(1)) * time.Second)
	}
}

// runOpts are what a verification test varies about a run.
type runOpts struct {
	files   map[string]string // workspace files
	input   map[string]any
	runID   string
	now     func() time.Time
	adapter haygent.Adapter

	upstream []cid.Cid
}

// runHaygent runs the package in dir on st and returns the receipt.
func runHaygent(t *testing.T, st cas.Store, dir string, o runOpts) *haygent.Result {
	t.Helper()
	ws := t.TempDir()
	for name, content := range o.files {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pkg, err := haygent.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if o.input == nil {
		o.input = map[string]any{}
	}
	if o.now == nil {
		o.now = fixedClock
	}
	res, err := haygent.Run(context.Background(), pkg, o.input, haygent.Options{
		Store: st, Key: verifyKey, Workspace: ws, Now: o.now, RunID: o.runID, Adapter: o.adapter,
		Upstream: o.upstream,
	})
	if err != nil {
		t.Fatalf("run %s: %v", dir, err)
	}
	return res
}

func roundtripRun(t *testing.T, st cas.Store) *haygent.Result {
	return runHaygent(t, st, filepath.Join(fixtures, "haygents", "roundtrip"), runOpts{files: map[string]string{"data.bin": "some bytes to keep"}})
}

// verify verifies c and logs the table.
func verifyOf(t *testing.T, st cas.Store, c cid.Cid, keys []ed25519.PublicKey) *verify.Verification {
	t.Helper()
	v, err := verify.VerifyReceipt(context.Background(), st, c, keys)
	if err != nil {
		t.Fatalf("VerifyReceipt: %v", err)
	}
	for _, ch := range v.Checks {
		mark := "ok  "
		if !ch.OK {
			mark = "FAIL"
		}
		t.Logf("%s %-22s %s", mark, ch.Name, ch.Detail)
	}
	return v
}

func findCheck(v *verify.Verification, name string) *verify.Check {
	for i := range v.Checks {
		if v.Checks[i].Name == name {
			return &v.Checks[i]
		}
	}
	return nil
}

// wantOK fails unless every check passed and the named ones are present.
func wantOK(t *testing.T, v *verify.Verification, names ...string) {
	t.Helper()
	if !v.OK() {
		t.Fatalf("verification failed: %+v", *v.FirstFailure())
	}
	for _, n := range names {
		if findCheck(v, n) == nil {
			t.Errorf("no check %q", n)
		}
	}
}

// wantFailed fails unless the check name failed with a detail holding
// every one of parts.
func wantFailed(t *testing.T, v *verify.Verification, name string, parts ...string) {
	t.Helper()
	if v.OK() {
		t.Fatalf("verification passed; want %q to fail", name)
	}
	c := findCheck(v, name)
	if c == nil {
		t.Fatalf("no check %q", name)
	}
	if c.OK {
		t.Fatalf("check %q passed (%s); want it to fail", name, c.Detail)
	}
	for _, p := range parts {
		if !strings.Contains(c.Detail, p) {
			t.Errorf("check %q: detail %q does not name %q", name, c.Detail, p)
		}
	}
}

// wantPassed fails unless the check name is present and passed.
func wantPassed(t *testing.T, v *verify.Verification, name string) {
	t.Helper()
	c := findCheck(v, name)
	if c == nil || !c.OK {
		t.Errorf("check %q: %+v, want it to pass", name, c)
	}
}

// ---- helpers to rebuild a ledger ----

func putObject(t *testing.T, st cas.Store, v any) cid.Cid {
	t.Helper()
	data, err := cas.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	b := cas.NewBlock(cas.DagCBOR, data)
	if err := st.Put(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	return b.CID()
}

func loadReceipt(t *testing.T, st cas.Store, c cid.Cid) *ledger.Receipt {
	t.Helper()
	r, err := ledger.LoadReceipt(context.Background(), st, c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func loadObject(t *testing.T, st cas.Store, c cid.Cid, v any) {
	t.Helper()
	data, err := st.Get(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if err := cas.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

// chainOf returns the transitions of a receipt, oldest first, and their CIDs.
func chainOf(t *testing.T, st cas.Store, r *ledger.Receipt) ([]ledger.Transition, []cid.Cid) {
	t.Helper()
	var ts []ledger.Transition
	var cids []cid.Cid
	for next := &r.Head; next != nil; {
		var tr ledger.Transition
		loadObject(t, st, next.Cid, &tr)
		ts = append([]ledger.Transition{tr}, ts...)
		cids = append([]cid.Cid{next.Cid}, cids...)
		next = tr.Prior
	}
	return ts, cids
}

// resign signs r with key, stores it and returns its CID.
func resign(t *testing.T, st cas.Store, r *ledger.Receipt, key ed25519.PrivateKey) cid.Cid {
	t.Helper()
	r.Signature = nil
	if err := r.Sign(key, nil); err != nil {
		t.Fatal(err)
	}
	return putObject(t, st, r)
}

// relink stores ts as a fresh chain (each Prior set to the one before),
// points r at its head, counts it, re-signs r with the runner key and
// returns the new receipt's CID.
func relink(t *testing.T, st cas.Store, r *ledger.Receipt, ts []ledger.Transition) cid.Cid {
	t.Helper()
	var prior *cas.Link
	for _, tr := range ts {
		tr.Prior = prior
		l := cas.Link{Cid: putObject(t, st, &tr)}
		prior = &l
	}
	r.Head = *prior
	r.Transitions = int64(len(ts))
	return resign(t, st, r, verifyKey)
}

// copyPackage copies a fixture package into a temporary directory and
// writes the given files over it.
func copyPackage(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(fixtures, "haygents", name))); err != nil {
		t.Fatal(err)
	}
	for p, content := range files {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(p)), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// multiStep is the roundtrip package with a noop before and after the
// roundtrip: four transitions (a, store, b, gates).
func multiStep(t *testing.T) string {
	return copyPackage(t, "roundtrip", map[string]string{"spine/spine.json": `{"steps": [
		{"id": "a", "kind": "builtin", "op": "noop"},
		{"id": "store", "kind": "builtin", "op": "roundtrip", "args": {"path": "data.bin"}},
		{"id": "b", "kind": "builtin", "op": "noop"}]}`})
}

// ---- receipts that verify ----

func TestVerifyPass(t *testing.T) {
	st := memstore.New()
	res := roundtripRun(t, st)
	if res.Receipt.Status != ledger.StatusPass {
		t.Fatalf("fixture run: %s", res.Receipt.Status)
	}
	v := verifyOf(t, st, res.ReceiptCID, trusted)
	wantOK(t, v, "block hashes", "canonical form", "transition chain", "receipt index", "signature",
		"trusted signer", "package gates", "gate EXACT_ROUND_TRIP", "status")
	if v.Receipt != res.ReceiptCID || v.Status != ledger.StatusPass || v.Run != res.Receipt.Run {
		t.Errorf("verification of %s: receipt %s, status %s, run %s", res.ReceiptCID, v.Receipt, v.Status, v.Run)
	}
	if v.Transitions != 2 || v.Blocks < 10 {
		t.Errorf("%d transitions, %d blocks", v.Transitions, v.Blocks)
	}
	if c := findCheck(v, "gate EXACT_ROUND_TRIP"); c.Detail != "recorded PASS, recomputed PASS" {
		t.Errorf("gate detail %q", c.Detail)
	}
	if v.FirstFailure() != nil {
		t.Errorf("FirstFailure of a good receipt: %+v", v.FirstFailure())
	}
}

func TestVerifyTrust(t *testing.T) {
	st := memstore.New()
	res := roundtripRun(t, st)
	t.Run("untrusted", func(t *testing.T) {
		v := verifyOf(t, st, res.ReceiptCID, []ed25519.PublicKey{strangerK.Public().(ed25519.PublicKey)})
		wantFailed(t, v, "trusted signer", ledger.FormatPublicKey(verifyPub), "not among")
		wantPassed(t, v, "signature")
		if f := v.FirstFailure(); f.Name != "trusted signer" {
			t.Errorf("first failure %q", f.Name)
		}
		for _, c := range v.Checks {
			if !c.OK && c.Name != "trusted signer" {
				t.Errorf("check %q failed too: %s", c.Name, c.Detail)
			}
		}
	})
	t.Run("no keys", func(t *testing.T) {
		v := verifyOf(t, st, res.ReceiptCID, nil)
		wantFailed(t, v, "trusted signer", "no trusted keys given")
	})
	t.Run("among several", func(t *testing.T) {
		v := verifyOf(t, st, res.ReceiptCID, []ed25519.PublicKey{strangerK.Public().(ed25519.PublicKey), verifyPub})
		wantOK(t, v)
	})
}

func TestVerifyHalt(t *testing.T) {
	reader := filepath.Join(fixtures, "haygents", "reader")
	t.Run("denied", func(t *testing.T) {
		st := memstore.New()
		res := runHaygent(t, st, reader, runOpts{files: map[string]string{"x.txt": "x"}, input: map[string]any{"path": "../x"}})
		if res.Receipt.Status != ledger.StatusHalt {
			t.Fatalf("fixture run: %s", res.Receipt.Status)
		}
		wantOK(t, verifyOf(t, st, res.ReceiptCID, trusted), "status")
	})
	t.Run("gate fails", func(t *testing.T) {
		st := memstore.New()
		res := runHaygent(t, st, reader, runOpts{files: map[string]string{"x.txt": ""}, input: map[string]any{"path": "x.txt"}})
		if res.Receipt.Status != ledger.StatusHalt || res.Receipt.Halt.FailedGate != "READ_OK" {
			t.Fatalf("fixture run: %s %+v", res.Receipt.Status, res.Receipt.Halt)
		}
		v := verifyOf(t, st, res.ReceiptCID, trusted)
		wantOK(t, v, "gate READ_OK", "status")
		if c := findCheck(v, "gate READ_OK"); c.Detail != "recorded FAIL, recomputed FAIL" {
			t.Errorf("gate detail %q", c.Detail)
		}
	})
	t.Run("reader passes", func(t *testing.T) {
		st := memstore.New()
		res := runHaygent(t, st, reader, runOpts{files: map[string]string{"x.txt": "hello"}, input: map[string]any{"path": "x.txt"}})
		if res.Receipt.Status != ledger.StatusPass {
			t.Fatalf("fixture run: %s", res.Receipt.Status)
		}
		wantOK(t, verifyOf(t, st, res.ReceiptCID, trusted), "gate READ_OK")
	})
}

// TestVerifyUpstream verifies receipts whose input packet records upstream
// receipts that the store does not hold, as in a Work Order node's staging
// store: they are not part of what this receipt's verification walks.
func TestVerifyUpstream(t *testing.T) {
	up := roundtripRun(t, memstore.New()).ReceiptCID
	dir := filepath.Join(fixtures, "haygents", "roundtrip")
	files := map[string]string{"data.bin": "x"}
	t.Run("accepted", func(t *testing.T) {
		st := memstore.New()
		res := runHaygent(t, st, dir, runOpts{files: files, upstream: []cid.Cid{up}})
		v := verifyOf(t, st, res.ReceiptCID, trusted)
		wantOK(t, v)
		if c := findCheck(v, "block hashes"); !strings.Contains(c.Detail, "1 upstream receipts not walked") {
			t.Errorf("block hashes: %s", c.Detail)
		}
	})
}

// TestVerifyRepairs verifies a run with slot calls and repairs: every
// gate evaluation is recomputed, not only the last.
func TestVerifyRepairs(t *testing.T) {
	adapter, err := haygent.LoadScript(filepath.Join(fixtures, "scripts", "claimer.json"))
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	res := runHaygent(t, st, filepath.Join(fixtures, "haygents", "claimer"), runOpts{
		input: map[string]any{"task": "did the tests pass?"}, adapter: adapter, now: steppingClock(),
	})
	if res.Receipt.Status != ledger.StatusHalt || res.Receipt.Repairs != 2 || len(res.Receipt.SlotCalls) == 0 {
		t.Fatalf("fixture run: %s, %d repairs", res.Receipt.Status, res.Receipt.Repairs)
	}
	v := verifyOf(t, st, res.ReceiptCID, trusted)
	wantOK(t, v, "gate TEST_PASS")
	earlier := 0
	for _, c := range v.Checks {
		if strings.HasPrefix(c.Name, "gate TEST_PASS (seq ") {
			earlier++
		}
	}
	ts, _ := chainOf(t, st, res.Receipt)
	evaluations := 0
	for _, tr := range ts {
		if tr.Kind == "gates" {
			evaluations++
		}
	}
	if evaluations < 2 || earlier != evaluations-1 {
		t.Errorf("%d earlier evaluations checked, the chain holds %d", earlier, evaluations)
	}

	// A forged verdict in an earlier evaluation is caught too.
	r := loadReceipt(t, st, res.ReceiptCID)
	ts, _ = chainOf(t, st, r)
	var gr ledger.GateResult
	loadObject(t, st, ts[1].Gates[0].Cid, &gr)
	gr.Verdict = "FAIL"
	ts[1].Gates = []cas.Link{{Cid: putObject(t, st, &gr)}}
	v = verifyOf(t, st, relink(t, st, r, ts), trusted)
	wantFailed(t, v, "gate TEST_PASS (seq 1)", "recorded FAIL, recomputed MISSING")
	wantPassed(t, v, "gate TEST_PASS")
}

// freshness is a package whose gates depend on the exact instants the
// runtime used: a max_age that only the evaluation time (not the gates
// transition's start) makes stale, and a digest made stale by a later
// write to its file.
func freshness(t *testing.T, spine string) string {
	return copyPackage(t, "roundtrip", map[string]string{
		"permissions.json": `{"grants": ["read:file:**", "write:file:out.txt", "network:none", "secret:none", "publish:none", "spend:none"]}`,
		"spine/spine.json": spine,
		"gates/gates.json": `{"gates": [
			{"id": "DIGEST_FRESH", "evidence": "digest", "subject": "file:out.txt", "predicate": "ev.size > 0",
			 "on_missing": "fail", "on_stale": "fail", "on_invalid": "fail", "on_contradictory": "halt", "on_timeout": "fail"},
			{"id": "WRITE_RECENT", "evidence": "mutation", "subject": "file:out.txt", "predicate": "ev.after != \"\"", "max_age": "2500ms",
			 "on_missing": "fail", "on_stale": "fail", "on_invalid": "fail", "on_contradictory": "halt", "on_timeout": "fail"}]}`,
	})
}

func TestVerifyFreshness(t *testing.T) {
	write := `{"id": "w", "kind": "builtin", "op": "write_file", "args": {"path": "out.txt", "template": "new"}}`
	digest := `{"id": "d", "kind": "builtin", "op": "digest", "args": {"file": "out.txt"}}`
	for _, tc := range []struct {
		name, spine string
		want        map[string]string
	}{
		// The write is the last step: its evidence is 3 clock readings old
		// when the gates evaluate, 2 at the gates transition's start.
		{"digest then write", "[" + digest + "," + write + "]", map[string]string{"DIGEST_FRESH": "STALE", "WRITE_RECENT": "STALE"}},
		// A noop after the write ages the mutation past max_age either way;
		// the digest follows the write, so it is fresh.
		{"write then digest", "[" + write + "," + digest + "]", map[string]string{"DIGEST_FRESH": "PASS", "WRITE_RECENT": "STALE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := memstore.New()
			res := runHaygent(t, st, freshness(t, `{"steps": `+tc.spine+`}`), runOpts{files: map[string]string{"out.txt": "old"}, now: steppingClock()})
			r := res.Receipt
			got := map[string]string{}
			for _, g := range r.Gates {
				var gr ledger.GateResult
				loadObject(t, st, g.Cid, &gr)
				got[gr.Gate] = gr.Verdict
			}
			for id, want := range tc.want {
				if got[id] != want {
					t.Fatalf("the runtime recorded %s %s, want %s (the fixture no longer exercises the clock)", id, got[id], want)
				}
			}
			wantOK(t, verifyOf(t, st, res.ReceiptCID, trusted), "gate DIGEST_FRESH", "gate WRITE_RECENT")
			if tc.name != "digest then write" {
				return
			}
			// The runtime's Env.Now is the instant the gate results record,
			// a clock reading after the gates transition's start: measured
			// from the start the write would still be fresh.
			ts, _ := chainOf(t, st, r)
			var mut ledger.Evidence
			loadObject(t, st, ts[1].Evidence[0].Cid, &mut)
			started, _ := time.Parse(time.RFC3339Nano, ts[2].StartedAt)
			observed, _ := time.Parse(time.RFC3339Nano, mut.ObservedAt)
			if mut.Kind != "mutation" || started.Sub(observed) > 2500*time.Millisecond {
				t.Errorf("%s evidence %s old at the gates' start: the fixture no longer tells the two instants apart", mut.Kind, started.Sub(observed))
			}
		})
	}
}

// ---- tampering ----

// TestVerifyStatusForged re-signs HALT receipts as PASS.
func TestVerifyStatusForged(t *testing.T) {
	reader := filepath.Join(fixtures, "haygents", "reader")
	forge := func(t *testing.T, st cas.Store, c cid.Cid, key ed25519.PrivateKey) cid.Cid {
		r := loadReceipt(t, st, c)
		r.Status, r.Halt = ledger.StatusPass, nil
		out := cas.Link{Cid: putObject(t, st, &ledger.Packet{Type: ledger.TypePacket, Schema: haygent.OutputSchema, Payload: map[string]any{}})}
		r.Output = &out
		return resign(t, st, r, key)
	}
	t.Run("gate failed, trusted key", func(t *testing.T) {
		st := memstore.New()
		res := runHaygent(t, st, reader, runOpts{files: map[string]string{"x.txt": ""}, input: map[string]any{"path": "x.txt"}})
		v := verifyOf(t, st, forge(t, st, res.ReceiptCID, verifyKey), trusted)
		wantFailed(t, v, "status", "READ_OK", "recomputed FAIL")
		wantPassed(t, v, "signature")
		wantPassed(t, v, "trusted signer")
		wantPassed(t, v, "gate READ_OK") // the record is honest; the status is not
	})
	t.Run("gate failed, untrusted key", func(t *testing.T) {
		st := memstore.New()
		res := runHaygent(t, st, reader, runOpts{files: map[string]string{"x.txt": ""}, input: map[string]any{"path": "x.txt"}})
		v := verifyOf(t, st, forge(t, st, res.ReceiptCID, strangerK), trusted)
		wantFailed(t, v, "trusted signer", "not among")
		wantFailed(t, v, "status", "READ_OK")
		if f := v.FirstFailure(); f.Name != "trusted signer" {
			t.Errorf("first failure %q", f.Name)
		}
	})
	t.Run("halted before the gates", func(t *testing.T) {
		st := memstore.New()
		res := runHaygent(t, st, reader, runOpts{files: map[string]string{"x.txt": "x"}, input: map[string]any{"path": "../x"}})
		v := verifyOf(t, st, forge(t, st, res.ReceiptCID, verifyKey), trusted)
		wantFailed(t, v, "status", "no gate evaluation")
	})
	t.Run("gate verdict forged too", func(t *testing.T) {
		// Rewrite the gate result to PASS as well: the recomputation
		// disagrees with the record.
		st := memstore.New()
		res := runHaygent(t, st, reader, runOpts{files: map[string]string{"x.txt": ""}, input: map[string]any{"path": "x.txt"}})
		r := loadReceipt(t, st, res.ReceiptCID)
		ts, _ := chainOf(t, st, r)
		last := &ts[len(ts)-1]
		var gr ledger.GateResult
		loadObject(t, st, last.Gates[0].Cid, &gr)
		gr.Verdict, gr.Action = "PASS", "pass"
		last.Gates = []cas.Link{{Cid: putObject(t, st, &gr)}}
		last.Status = "ok"
		r.Gates = last.Gates
		r.Steps[len(r.Steps)-1].Status = "ok"
		r.Status, r.Halt = ledger.StatusPass, nil
		out := cas.Link{Cid: putObject(t, st, &ledger.Packet{Type: ledger.TypePacket, Schema: haygent.OutputSchema, Payload: map[string]any{}})}
		r.Output = &out
		v := verifyOf(t, st, relink(t, st, r, ts), trusted)
		wantFailed(t, v, "gate READ_OK", "recorded PASS, recomputed FAIL", "seq 1")
		wantFailed(t, v, "status", "READ_OK")
	})
}

func TestVerifyChainTampered(t *testing.T) {
	st := memstore.New()
	res := runHaygent(t, st, multiStep(t), runOpts{files: map[string]string{"data.bin": "bytes"}})
	if res.Receipt.Status != ledger.StatusPass || res.Receipt.Transitions != 4 {
		t.Fatalf("fixture run: %s, %d transitions", res.Receipt.Status, res.Receipt.Transitions)
	}
	wantOK(t, verifyOf(t, st, res.ReceiptCID, trusted))

	t.Run("removed from the middle", func(t *testing.T) {
		r := loadReceipt(t, st, res.ReceiptCID)
		ts, _ := chainOf(t, st, r)
		ts = append(ts[:1:1], ts[2:]...) // drop seq 1, the roundtrip
		v := verifyOf(t, st, relink(t, st, r, ts), trusted)
		wantFailed(t, v, "transition chain", "seq 2", "gap")
		if f := v.FirstFailure(); f.Name != "transition chain" {
			t.Errorf("first failure %q", f.Name)
		}
		// Its evidence is gone from the chain, so the gate says MISSING now.
		wantFailed(t, v, "gate EXACT_ROUND_TRIP", "recomputed MISSING")
	})
	t.Run("removed, seqs renumbered", func(t *testing.T) {
		r := loadReceipt(t, st, res.ReceiptCID)
		ts, _ := chainOf(t, st, r)
		ts = append(ts[:1:1], ts[2:]...)
		for i := range ts {
			ts[i].Seq = int64(i)
		}
		v := verifyOf(t, st, relink(t, st, r, ts), trusted)
		wantPassed(t, v, "transition chain")
		wantFailed(t, v, "receipt index", "steps")
		wantFailed(t, v, "gate EXACT_ROUND_TRIP", "recomputed MISSING")
		wantFailed(t, v, "status", "EXACT_ROUND_TRIP")
	})
	t.Run("swapped", func(t *testing.T) {
		r := loadReceipt(t, st, res.ReceiptCID)
		ts, _ := chainOf(t, st, r)
		ts[1], ts[2] = ts[2], ts[1]
		v := verifyOf(t, st, relink(t, st, r, ts), trusted)
		wantFailed(t, v, "transition chain", "out of order")
	})
	t.Run("repeated", func(t *testing.T) {
		r := loadReceipt(t, st, res.ReceiptCID)
		ts, _ := chainOf(t, st, r)
		ts = append(ts[:2:2], ts[1:]...)
		v := verifyOf(t, st, relink(t, st, r, ts), trusted)
		wantFailed(t, v, "transition chain", "seq 1 is repeated")
	})
	t.Run("count inflated", func(t *testing.T) {
		r := loadReceipt(t, st, res.ReceiptCID)
		r.Transitions++
		v := verifyOf(t, st, resign(t, st, r, verifyKey), trusted)
		wantFailed(t, v, "transition chain", "the receipt counts 5")
	})
	t.Run("count deflated", func(t *testing.T) {
		r := loadReceipt(t, st, res.ReceiptCID)
		r.Transitions--
		v := verifyOf(t, st, resign(t, st, r, verifyKey), trusted)
		wantFailed(t, v, "transition chain", "longer than the 3 transitions")
	})

	// Another run of the same package, whose blocks share the store.
	other := runHaygent(t, st, multiStep(t), runOpts{files: map[string]string{"data.bin": "bytes"}, runID: "run-other"})
	otherR := loadReceipt(t, st, other.ReceiptCID)
	otherTs, _ := chainOf(t, st, otherR)
	t.Run("transition from another run", func(t *testing.T) {
		r := loadReceipt(t, st, res.ReceiptCID)
		ts, _ := chainOf(t, st, r)
		ts[1] = otherTs[1]
		v := verifyOf(t, st, relink(t, st, r, ts), trusted)
		wantFailed(t, v, "transition chain", "seq 1", `run "run-other"`)
	})
	t.Run("evidence from another run", func(t *testing.T) {
		r := loadReceipt(t, st, res.ReceiptCID)
		ts, _ := chainOf(t, st, r)
		ts[1].Evidence = otherTs[1].Evidence
		r.Evidence = otherTs[1].Evidence
		v := verifyOf(t, st, relink(t, st, r, ts), trusted)
		wantFailed(t, v, "transition chain", otherTs[1].Evidence[0].String(), `run "run-other"`)
	})
	t.Run("evidence from another step", func(t *testing.T) {
		r := loadReceipt(t, st, res.ReceiptCID)
		ts, _ := chainOf(t, st, r)
		ts[2].Evidence, ts[1].Evidence = ts[1].Evidence, nil
		v := verifyOf(t, st, relink(t, st, r, ts), trusted)
		wantFailed(t, v, "transition chain", `step "store"`, `not step "b"`)
	})
}

// A permission snapshot is an hg/permissions@1 object however often it is
// linked: the receipt and every transition link the same one, and a link
// to another object the verifier has read, such as the input packet, is
// no snapshot.
func TestVerifyPermissionsLink(t *testing.T) {
	st := memstore.New()
	res := runHaygent(t, st, multiStep(t), runOpts{files: map[string]string{"data.bin": "bytes"}})
	wantOK(t, verifyOf(t, st, res.ReceiptCID, trusted), "canonical form")

	t.Run("everywhere the input packet", func(t *testing.T) {
		r := loadReceipt(t, st, res.ReceiptCID)
		ts, _ := chainOf(t, st, r)
		for i := range ts {
			ts[i].Permissions = r.Input
		}
		r.Permissions = r.Input
		v := verifyOf(t, st, relink(t, st, r, ts), trusted)
		wantFailed(t, v, "canonical form", "permission snapshot "+r.Input.String(), "is not an hg/permissions@1 object")
	})
	t.Run("the receipt's only", func(t *testing.T) {
		r := loadReceipt(t, st, res.ReceiptCID)
		r.Permissions = r.Input
		v := verifyOf(t, st, resign(t, st, r, verifyKey), trusted)
		wantFailed(t, v, "canonical form", "permission snapshot "+r.Input.String(), "is not an hg/permissions@1 object")
	})
}

func TestVerifyBlocksDamaged(t *testing.T) {
	t.Run("evidence deleted", func(t *testing.T) {
		st := memstore.New()
		res := roundtripRun(t, st)
		ev := res.Receipt.Evidence[0].Cid
		if err := st.Delete(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		v := verifyOf(t, st, res.ReceiptCID, trusted)
		wantFailed(t, v, "block hashes", ev.String(), "missing")
		if f := v.FirstFailure(); f.Name != "block hashes" {
			t.Errorf("first failure %q", f.Name)
		}
		// What depends on it cannot pass by default.
		wantFailed(t, v, "gate EXACT_ROUND_TRIP", "cannot be recomputed", ev.String())
		wantFailed(t, v, "status")
		wantPassed(t, v, "signature")
	})
	t.Run("transition corrupted", func(t *testing.T) {
		st := storetest.NewCorruptible(memstore.New())
		res := roundtripRun(t, st)
		head := res.Receipt.Head.Cid
		data, err := st.Get(context.Background(), head)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/2] ^= 0x20
		st.Corrupt(head, data)
		v := verifyOf(t, st, res.ReceiptCID, trusted)
		wantFailed(t, v, "block hashes", head.String(), "corrupt")
		wantFailed(t, v, "transition chain", head.String())
	})
	t.Run("file chunk corrupted", func(t *testing.T) {
		// The package tree is part of the closure: its raw chunks are
		// hashed too.
		st := storetest.NewCorruptible(memstore.New())
		res := roundtripRun(t, st)
		var chunk cid.Cid
		err := cas.Walk(context.Background(), st, []cid.Cid{res.ReceiptCID}, nil, func(c cid.Cid, _ []byte) error {
			if c.Type() == cas.Raw && !chunk.Defined() {
				chunk = c
			}
			return nil
		})
		if err != nil || !chunk.Defined() {
			t.Fatalf("no raw block found (%v)", err)
		}
		st.Corrupt(chunk, []byte("not what was stored"))
		v := verifyOf(t, st, res.ReceiptCID, trusted)
		wantFailed(t, v, "block hashes", chunk.String(), "corrupt")
	})
	t.Run("receipt missing", func(t *testing.T) {
		st := memstore.New()
		res := roundtripRun(t, st)
		if err := st.Delete(context.Background(), res.ReceiptCID); err != nil {
			t.Fatal(err)
		}
		v := verifyOf(t, st, res.ReceiptCID, trusted)
		wantFailed(t, v, "block hashes", res.ReceiptCID.String())
		wantFailed(t, v, "status", "not checked")
		for _, c := range v.Checks {
			if c.OK {
				t.Errorf("check %q passed for a missing receipt", c.Name)
			}
		}
	})
	t.Run("receipt not canonical", func(t *testing.T) {
		st := memstore.New()
		res := roundtripRun(t, st)
		data, err := st.Get(context.Background(), res.ReceiptCID)
		if err != nil {
			t.Fatal(err)
		}
		n, err := cas.DecodeNode(data)
		if err != nil {
			t.Fatal(err)
		}
		n.(map[string]any)["extra"] = "field"
		enc, err := cas.EncodeNode(n)
		if err != nil {
			t.Fatal(err)
		}
		b := cas.NewBlock(cas.DagCBOR, enc)
		if err := st.Put(context.Background(), b); err != nil {
			t.Fatal(err)
		}
		v := verifyOf(t, st, b.CID(), trusted)
		wantPassed(t, v, "block hashes")
		wantFailed(t, v, "canonical form", b.CID().String())
	})
}

func TestVerifyPackageChanged(t *testing.T) {
	st := memstore.New()
	res := roundtripRun(t, st)
	repoint := func(t *testing.T, gates string) cid.Cid {
		dir := copyPackage(t, "roundtrip", map[string]string{"gates/gates.json": gates})
		pkg, err := cas.PutTree(context.Background(), st, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := loadReceipt(t, st, res.ReceiptCID)
		r.Package = cas.Link{Cid: pkg}
		return resign(t, st, r, verifyKey)
	}
	const rules = `"on_missing": "fail", "on_stale": "fail", "on_invalid": "fail", "on_contradictory": "halt", "on_timeout": "fail"`
	t.Run("stricter predicate", func(t *testing.T) {
		v := verifyOf(t, st, repoint(t, `{"gates": [{"id": "EXACT_ROUND_TRIP", "evidence": "digest", "subject": "file:data.bin",
			"predicate": "ev.equal == true && ev.size > 1000000", `+rules+`}]}`), trusted)
		wantFailed(t, v, "gate EXACT_ROUND_TRIP", "recorded PASS, recomputed FAIL", "predicate recorded")
		wantFailed(t, v, "status", "EXACT_ROUND_TRIP")
		wantFailed(t, v, "receipt index", "ran package")
	})
	t.Run("same verdict, other predicate", func(t *testing.T) {
		v := verifyOf(t, st, repoint(t, `{"gates": [{"id": "EXACT_ROUND_TRIP", "evidence": "digest", "subject": "file:data.bin",
			"predicate": "ev.equal == true", `+rules+`}]}`), trusted)
		wantFailed(t, v, "gate EXACT_ROUND_TRIP", "recorded PASS, recomputed PASS", "predicate recorded")
	})
	t.Run("does not compile", func(t *testing.T) {
		v := verifyOf(t, st, repoint(t, `{"gates": [{"id": "EXACT_ROUND_TRIP", "evidence": "digest", "subject": "file:data.bin",
			"predicate": "ev.size >", `+rules+`}]}`), trusted)
		wantFailed(t, v, "gate EXACT_ROUND_TRIP", "does not compile")
		wantFailed(t, v, "status")
	})
	t.Run("gate renamed", func(t *testing.T) {
		v := verifyOf(t, st, repoint(t, `{"gates": [{"id": "OTHER", "evidence": "digest", "subject": "file:data.bin",
			"predicate": "ev.equal == true && ev.input == ev.output && ev.size > 0", `+rules+`}]}`), trusted)
		wantFailed(t, v, "gate EXACT_ROUND_TRIP", "does not define")
		wantFailed(t, v, "gate OTHER", "no result")
		wantFailed(t, v, "status", "OTHER")
	})
	t.Run("no gates file", func(t *testing.T) {
		r := loadReceipt(t, st, res.ReceiptCID)
		r.Package = r.Input // a packet, not a tree
		v := verifyOf(t, st, resign(t, st, r, verifyKey), trusted)
		wantFailed(t, v, "package gates", r.Input.String())
		wantFailed(t, v, "gate EXACT_ROUND_TRIP", "cannot be read")
		wantFailed(t, v, "status")
	})
}

func TestVerifyContext(t *testing.T) {
	st := memstore.New()
	res := roundtripRun(t, st)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := verify.VerifyReceipt(ctx, st, res.ReceiptCID, trusted); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

func TestVerifyReceiptChain(t *testing.T) {
	dir := filepath.Join(fixtures, "haygents", "roundtrip")
	files := map[string]string{"data.bin": "x"}
	chain := func(t *testing.T, st cas.Store, c cid.Cid) []*verify.Verification {
		t.Helper()
		vs, err := verify.VerifyReceiptChain(context.Background(), st, c, trusted)
		if err != nil {
			t.Fatal(err)
		}
		return vs
	}
	t.Run("two levels, shared upstream", func(t *testing.T) {
		st := memstore.New()
		a := roundtripRun(t, st).ReceiptCID
		b := runHaygent(t, st, dir, runOpts{files: files, upstream: []cid.Cid{a}}).ReceiptCID
		c := runHaygent(t, st, dir, runOpts{files: map[string]string{"data.bin": "y"}, upstream: []cid.Cid{a, b}}).ReceiptCID
		vs := chain(t, st, c)
		if len(vs) != 3 || vs[0].Receipt != a || vs[1].Receipt != b || vs[2].Receipt != c {
			t.Fatalf("verified %d receipts, want a, b, c once each, upstream first", len(vs))
		}
		for _, v := range vs {
			wantOK(t, v)
		}
		wantPassed(t, vs[2], verify.CheckUpstream)
		if findCheck(vs[0], verify.CheckUpstream) != nil {
			t.Error("a receipt without upstream receipts has an upstream check")
		}
	})
	t.Run("upstream HALT", func(t *testing.T) {
		st := memstore.New()
		reader := filepath.Join(fixtures, "haygents", "reader")
		halt := runHaygent(t, st, reader, runOpts{files: map[string]string{"x.txt": ""}, input: map[string]any{"path": "x.txt"}})
		if halt.Receipt.Status != ledger.StatusHalt {
			t.Fatalf("fixture: %s", halt.Receipt.Status)
		}
		down := runHaygent(t, st, dir, runOpts{files: files, upstream: []cid.Cid{halt.ReceiptCID}}).ReceiptCID
		vs := chain(t, st, down)
		wantOK(t, vs[0]) // the HALT itself is honest
		wantFailed(t, vs[1], verify.CheckUpstream, halt.ReceiptCID.String(), "is a HALT, not a PASS")
	})
	t.Run("upstream missing", func(t *testing.T) {
		st := memstore.New()
		gone := roundtripRun(t, memstore.New()).ReceiptCID // in another store
		down := runHaygent(t, st, dir, runOpts{files: files, upstream: []cid.Cid{gone}}).ReceiptCID
		vs := chain(t, st, down)
		wantFailed(t, vs[len(vs)-1], verify.CheckUpstream, gone.String(), "does not verify")
	})
}

// TestChainVerifierRemember: a ChainVerifier given Verdicts takes an
// upstream receipt verified before as verified, but never the receipt it
// is asked for, never for other trusted keys, and never one that did not
// verify as a PASS.
func TestChainVerifierRemember(t *testing.T) {
	dir := filepath.Join(fixtures, "haygents", "roundtrip")
	ctx := context.Background()
	st := storetest.NewCorruptible(memstore.New())
	a := roundtripRun(t, st).ReceiptCID
	b := runHaygent(t, st, dir, runOpts{files: map[string]string{"data.bin": "x"}, upstream: []cid.Cid{a}}).ReceiptCID
	c := runHaygent(t, st, dir, runOpts{files: map[string]string{"data.bin": "y"}, upstream: []cid.Cid{b}}).ReceiptCID
	vs := verify.NewVerdicts(100)
	with := func(keys []ed25519.PublicKey) *verify.ChainVerifier {
		cv := verify.NewChainVerifier(st, keys, nil, nil)
		cv.Remember(vs)
		return cv
	}

	cv := with(trusted)
	v, err := cv.Verify(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	wantOK(t, v)
	if whole, own := vs.Len(); cv.Remembered() != 0 || whole != 3 || own != 3 || vs.Since().IsZero() {
		t.Fatalf("first verification: %d remembered, %d and %d held", cv.Remembered(), whole, own)
	}

	// Bounded: past max it starts again (a, b, c into room for two).
	small := verify.NewVerdicts(2)
	cv = verify.NewChainVerifier(st, trusted, nil, nil)
	cv.Remember(small)
	if _, err := cv.Verify(ctx, c); err != nil {
		t.Fatal(err)
	}
	if whole, own := small.Len(); whole != 1 || own != 1 {
		t.Fatalf("%d and %d held of three verified into room for two, want the last one", whole, own)
	}

	// Again: c and the b it names verified afresh, a (upstream of b)
	// taken as verified.
	cv = with(trusted)
	if v, err = cv.Verify(ctx, c); err != nil {
		t.Fatal(err)
	}
	wantOK(t, v)
	all := cv.All()
	if cv.Remembered() != 1 || len(all) != 2 || all[0].Receipt != b {
		t.Fatalf("second verification: %d remembered, %d verified", cv.Remembered(), len(all))
	}
	if up := findCheck(all[0], verify.CheckUpstream); !strings.Contains(up.Detail, "1 of them, with the receipts upstream of them, as verified before") {
		t.Errorf("b's upstream check does not say what was remembered: %s", up.Detail)
	}

	// a damaged on disk: its verdict, two links up from c, stands for c
	// (what Verdicts does not see, as documented); asked for, or one link
	// up from the receipt asked for, a is verified afresh and broken.
	if !st.Corrupt(a, []byte("not the receipt")) {
		t.Fatal("a not stored")
	}
	if v, err = with(trusted).Verify(ctx, c); err != nil || !v.OK() {
		t.Fatalf("c with a remembered: %v", err)
	}
	if v, err = with(trusted).Verify(ctx, a); err != nil || v.OK() {
		t.Fatalf("a damaged, asked for: verified (%v)", err)
	}
	if v, err = with(trusted).Verify(ctx, b); err != nil {
		t.Fatal(err)
	}
	wantFailed(t, v, verify.CheckUpstream, a.String(), "does not verify")

	// Other trusted keys: nothing remembered counts, and c (whose a is
	// damaged) is broken.
	cv = with([]ed25519.PublicKey{strangerK.Public().(ed25519.PublicKey), verifyPub})
	if v, err = cv.Verify(ctx, c); err != nil {
		t.Fatal(err)
	}
	if cv.Remembered() != 0 || v.OK() {
		t.Fatalf("with other keys: %d remembered, ok %v", cv.Remembered(), v.OK())
	}

	// A HALT upstream is never remembered as verified: its downstream
	// fails each time.
	reader := filepath.Join(fixtures, "haygents", "reader")
	halt := runHaygent(t, st, reader, runOpts{files: map[string]string{"x.txt": ""}, input: map[string]any{"path": "x.txt"}})
	down := runHaygent(t, st, dir, runOpts{files: map[string]string{"data.bin": "x"}, upstream: []cid.Cid{halt.ReceiptCID}}).ReceiptCID
	for range 2 {
		cv = with(trusted)
		if v, err = cv.Verify(ctx, down); err != nil {
			t.Fatal(err)
		}
		wantFailed(t, v, verify.CheckUpstream, "is a HALT, not a PASS")
		if cv.Remembered() != 0 {
			t.Fatal("a HALT taken as verified")
		}
	}
}

// TestChainVerifierAhead: verifying upstream receipts on workers ahead of
// the walk finds what the plain walk finds, check for check, on a long
// chain with a fan-in, with one receipt damaged in the middle, and with
// verdicts remembered.
func TestChainVerifierAhead(t *testing.T) {
	dir := filepath.Join(fixtures, "haygents", "roundtrip")
	ctx := context.Background()
	st := storetest.NewCorruptible(memstore.New())
	var chain []cid.Cid
	for i := range 24 {
		opts := runOpts{files: map[string]string{"data.bin": fmt.Sprint(i)}}
		if i > 0 {
			opts.upstream = []cid.Cid{chain[i-1]}
		}
		if i > 2 {
			opts.upstream = append(opts.upstream, chain[i-3])
		}
		chain = append(chain, runHaygent(t, st, dir, opts).ReceiptCID)
	}
	top := chain[len(chain)-1]
	// same compares the two, each with the Verdicts fresh returns (nil:
	// none).
	same := func(t *testing.T, fresh func() *verify.Verdicts) {
		t.Helper()
		run := func(workers int) (*verify.Verification, map[cid.Cid][]verify.Check) {
			cv := verify.NewChainVerifier(st, trusted, nil, nil)
			if fresh != nil {
				cv.Remember(fresh())
			}
			cv.Ahead(workers)
			v, err := cv.Verify(ctx, top)
			if err != nil {
				t.Fatal(err)
			}
			all := map[cid.Cid][]verify.Check{}
			for _, v := range cv.All() {
				all[v.Receipt] = v.Checks
			}
			return v, all
		}
		plain, plainAll := run(0)
		ahead, aheadAll := run(4)
		if !reflect.DeepEqual(plain.Checks, ahead.Checks) || plain.Status != ahead.Status {
			t.Fatalf("ahead differs from the plain walk:\nplain %+v\nahead %+v", plain.Checks, ahead.Checks)
		}
		if !reflect.DeepEqual(plainAll, aheadAll) {
			t.Fatalf("ahead verified %d receipts, the plain walk %d, or their checks differ", len(aheadAll), len(plainAll))
		}
	}
	t.Run("whole", func(t *testing.T) { same(t, nil) })
	t.Run("remembered", func(t *testing.T) {
		same(t, func() *verify.Verdicts {
			vs := verify.NewVerdicts(1000)
			cv := verify.NewChainVerifier(st, trusted, nil, nil)
			cv.Remember(vs)
			if _, err := cv.Verify(ctx, chain[12]); err != nil {
				t.Fatal(err)
			}
			return vs
		})
	})
	t.Run("damaged", func(t *testing.T) {
		if !st.Corrupt(chain[10], []byte("not the receipt")) {
			t.Fatal("not stored")
		}
		same(t, nil)
		v := verifyOf(t, st, chain[10], trusted)
		if v.OK() {
			t.Fatal("fixture: the damaged receipt verifies")
		}
	})
}

// TestChainVerifierBudget: a verification whose budget is spent stops with
// ErrOverBudget and keeps what it checked, so that verifications one after
// another, each allowed one new receipt far upstream, reach the whole
// chain's verdict: the plain walk's, a PASS for an intact chain and the
// damaged receipt named for a damaged one; never a PASS before the end.
func TestChainVerifierBudget(t *testing.T) {
	dir := filepath.Join(fixtures, "haygents", "roundtrip")
	ctx := context.Background()
	st := storetest.NewCorruptible(memstore.New())
	var chain []cid.Cid
	for i := range 12 {
		opts := runOpts{files: map[string]string{"data.bin": fmt.Sprint(i)}}
		if i > 0 {
			opts.upstream = []cid.Cid{chain[i-1]}
		}
		chain = append(chain, runHaygent(t, st, dir, opts).ReceiptCID)
	}
	top := chain[len(chain)-1]
	// bit by bit verifies top with a spent budget until it ends, and
	// returns the verification and how many tries it took.
	bit := func(t *testing.T, workers int) (*verify.Verification, int) {
		t.Helper()
		vs := verify.NewVerdicts(1000)
		for tries := 1; tries <= 2*len(chain); tries++ {
			cv := verify.NewChainVerifier(st, trusted, nil, nil)
			cv.Remember(vs)
			cv.Ahead(workers)
			cv.Budget(time.Now().Add(-time.Second))
			v, err := cv.Verify(ctx, top)
			if errors.Is(err, verify.ErrOverBudget) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			return v, tries
		}
		t.Fatalf("no verdict after %d tries", 2*len(chain))
		return nil, 0
	}
	for _, workers := range []int{0, 2} {
		v, tries := bit(t, workers)
		wantOK(t, v)
		// Top and the receipt it names are checked each time; one more
		// each try.
		if workers == 0 && tries != len(chain)-2 {
			t.Errorf("%d tries for a chain of %d, want %d", tries, len(chain), len(chain)-2)
		}
	}

	if !st.Corrupt(chain[4], []byte("not the receipt")) {
		t.Fatal("not stored")
	}
	all, err := verify.VerifyReceiptChain(ctx, st, top, trusted)
	if err != nil {
		t.Fatal(err)
	}
	plain := all[len(all)-1]
	for _, workers := range []int{0, 2} {
		v, _ := bit(t, workers)
		if v.OK() {
			t.Fatalf("verified with a damaged receipt upstream (workers %d)", workers)
		}
		got, want := v.FirstFailure(), findCheck(plain, verify.CheckUpstream)
		if got.Name != verify.CheckUpstream || !strings.Contains(got.Detail, chain[4].String()) || want.OK {
			t.Errorf("workers %d: %s: %s; the plain walk: %s", workers, got.Name, got.Detail, want.Detail)
		}
	}
}

// TestChainVerifierDepth: a verification made far upstream, with what
// Verdicts holds there, is not what a later Verify of the same verifier
// takes for a receipt nearer the one asked for: asked for receipt 1 after
// receipt 2, the verifier checks 1's upstream 0 afresh and finds it
// damaged, as a verifier asked for 1 alone does.
func TestChainVerifierDepth(t *testing.T) {
	dir := filepath.Join(fixtures, "haygents", "roundtrip")
	ctx := context.Background()
	st := storetest.NewCorruptible(memstore.New())
	var chain []cid.Cid
	for i := range 4 {
		opts := runOpts{files: map[string]string{"data.bin": fmt.Sprint(i)}}
		if i > 0 {
			opts.upstream = []cid.Cid{chain[i-1]}
		}
		chain = append(chain, runHaygent(t, st, dir, opts).ReceiptCID)
	}
	vs := verify.NewVerdicts(100)
	with := func() *verify.ChainVerifier {
		cv := verify.NewChainVerifier(st, trusted, nil, nil)
		cv.Remember(vs)
		return cv
	}
	if v, err := with().Verify(ctx, chain[3]); err != nil || !v.OK() {
		t.Fatalf("fixture: %v", err)
	}
	if !st.Corrupt(chain[0], []byte("not the receipt")) {
		t.Fatal("not stored")
	}
	alone, err := with().Verify(ctx, chain[1])
	if err != nil {
		t.Fatal(err)
	}
	wantFailed(t, alone, verify.CheckUpstream, chain[0].String(), "does not verify")
	for _, first := range []cid.Cid{chain[2], chain[3]} {
		cv := with()
		if _, err := cv.Verify(ctx, first); err != nil {
			t.Fatal(err)
		}
		v, err := cv.Verify(ctx, chain[1])
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(v.Checks, alone.Checks) {
			t.Errorf("receipt 1 after %s: %+v\nalone: %+v", first, v.FirstFailure(), alone.FirstFailure())
		}
		// All lists each receipt once, as verified last.
		seen := map[cid.Cid]bool{}
		for _, v := range cv.All() {
			if seen[v.Receipt] {
				t.Errorf("All lists %s twice", v.Receipt)
			}
			seen[v.Receipt] = true
		}
	}
}

package haygent_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/ipfs/go-cid"
)

// funcAdapter answers slots with a function.
type funcAdapter func(ctx context.Context, req haygent.SlotRequest) ([]byte, error)

func (funcAdapter) Name() string  { return "func" }
func (funcAdapter) Model() string { return "" }
func (f funcAdapter) Propose(ctx context.Context, req haygent.SlotRequest) ([]byte, error) {
	return f(ctx, req)
}

// A builtin step may not replace one of the state's own objects with a
// string or a number: the step fails, the run goes on to a truthful
// receipt, and nothing later finds a scalar where it keeps its records.
func TestStateObjectsKeepTheirShape(t *testing.T) {
	permissive := `{"$schema": "https://json-schema.org/draft/2020-12/schema"}`
	for _, tc := range []struct {
		name, spine string
		files       map[string]string // workspace files
	}{
		{name: "copy to output", spine: `{"steps": [
			{"id": "clobber", "kind": "builtin", "op": "copy_field", "args": {"from": "/input/value", "to": "/output"}},
			{"id": "check", "kind": "builtin", "op": "digest_equal", "args": {"a": "/input/value", "b": "/output"}}]}`},
		{name: "read into output", files: map[string]string{"data.txt": "hello"}, spine: `{"steps": [
			{"id": "clobber", "kind": "builtin", "op": "read_file", "args": {"path": "data.txt", "to": "/output"}},
			{"id": "check", "kind": "builtin", "op": "digest_equal", "args": {"a": "/input/value", "b": "/output"}}]}`},
		{name: "copy to steps", spine: `{"steps": [
			{"id": "clobber", "kind": "builtin", "op": "copy_field", "args": {"from": "/input/value", "to": "/steps"}},
			{"id": "check", "kind": "builtin", "op": "digest_equal", "args": {"a": "/input/value", "b": "/output"}}]}`},
		{name: "copy to input", spine: `{"steps": [
			{"id": "clobber", "kind": "builtin", "op": "copy_field", "args": {"from": "/input/value", "to": "/input"}},
			{"id": "check", "kind": "builtin", "op": "digest_equal", "args": {"a": "/input/value", "b": "/output"}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyPackage(t, "echo", map[string]string{
				"spine/spine.json":             tc.spine,
				"contracts/output.schema.json": permissive,
				"permissions.json":             `{"grants": ["read:file:**", "network:none", "secret:none", "publish:none", "spend:none"]}`,
			})
			st := memstore.New()
			res := runHaygent(t, st, dir, runOpts{input: map[string]any{"value": "hello"}, files: tc.files})
			if res.Receipt.Status != ledger.StatusHalt {
				t.Errorf("status %s, want HALT", res.Receipt.Status)
			}
			if s := res.Receipt.Steps[0]; s.Step != "clobber" || s.Status != "failed" {
				t.Errorf("first step %+v, want clobber failed", s)
			}
			wantOK(t, verifyOf(t, st, res.ReceiptCID, trusted))
		})
	}
	t.Run("copy to adjustable before a slot", func(t *testing.T) {
		dir := copyPackage(t, "claimer", map[string]string{"spine/spine.json": `{"steps": [
			{"id": "clobber", "kind": "builtin", "op": "copy_field", "args": {"from": "/input/x", "to": "/adjustable"}},
			{"id": "summarize", "kind": "slot", "slot": "summarize"}]}`})
		ad := funcAdapter(func(context.Context, haygent.SlotRequest) ([]byte, error) {
			return []byte(`{"summary": "ok"}`), nil
		})
		st := memstore.New()
		res := runHaygent(t, st, dir, runOpts{input: map[string]any{"x": "s"}, adapter: ad})
		if s := res.Receipt.Steps[0]; s.Step != "clobber" || s.Status != "failed" {
			t.Errorf("first step %+v, want clobber failed", s)
		}
		wantOK(t, verifyOf(t, st, res.ReceiptCID, trusted))
	})
}

// A slot whose calls the run's time limit cuts off halts as a TIMEOUT, as
// the limit does between steps: no proposal was rejected.
func TestSlotCutByRunTimeLimit(t *testing.T) {
	pkg, err := haygent.Load(copyPackage(t, "claimer", nil))
	if err != nil {
		t.Fatal(err)
	}
	pkg.Manifest.Timeouts.Run = "50ms"
	ad := funcAdapter(func(ctx context.Context, _ haygent.SlotRequest) ([]byte, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	res, err := haygent.Run(context.Background(), pkg, map[string]any{}, haygent.Options{Store: memstore.New(), Key: verifyKey, Adapter: ad})
	if err != nil {
		t.Fatalf("Run = %v, want a HALT receipt", err)
	}
	h := res.Receipt.Halt
	if h == nil {
		t.Fatalf("status %s, want a HALT", res.Receipt.Status)
	}
	if h.Verdict != "TIMEOUT" || h.RestartPoint != "summarize" || !strings.Contains(h.Reason, "during slot summarize") {
		t.Errorf("halt %s at %q: %s; want TIMEOUT at summarize, during slot summarize", h.Verdict, h.RestartPoint, h.Reason)
	}
}

// A caller that gives up during a slot call gets its context's error and
// no receipt.
func TestSlotCallerCancelled(t *testing.T) {
	pkg, err := haygent.Load(copyPackage(t, "claimer", nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ad := funcAdapter(func(ctx context.Context, _ haygent.SlotRequest) ([]byte, error) {
		cancel()
		return nil, ctx.Err()
	})
	res, err := haygent.Run(ctx, pkg, map[string]any{}, haygent.Options{Store: memstore.New(), Key: verifyKey, Adapter: ad})
	if !errors.Is(err, context.Canceled) || res != nil {
		t.Fatalf("Run = %v, %v; want context.Canceled and no result", res, err)
	}
}

// A HALT from the repair slot names a step of the spine to restart from:
// the repair slot is not one.
func TestRepairSlotHaltRestartPoint(t *testing.T) {
	// The claimer reruns from its only step; a rerun point of "" means
	// the first step.
	for _, rerunFrom := range []string{"summarize", ""} {
		name := "rerun from " + rerunFrom
		if rerunFrom == "" {
			name = "rerun from the first step"
		}
		t.Run(name, func(t *testing.T) {
			pkg, err := haygent.Load(copyPackage(t, "claimer", nil))
			if err != nil {
				t.Fatal(err)
			}
			pkg.Manifest.Repair.RerunFrom = rerunFrom
			calls := 0
			ad := funcAdapter(func(context.Context, haygent.SlotRequest) ([]byte, error) {
				calls++
				if calls == 1 {
					return []byte(`{"summary": "ok"}`), nil // the spine's slot step
				}
				return []byte(`not json`), nil // every repair try
			})
			st := memstore.New()
			res, err := haygent.Run(context.Background(), pkg, map[string]any{}, haygent.Options{Store: st, Key: verifyKey, Adapter: ad, Now: fixedClock})
			if err != nil {
				t.Fatal(err)
			}
			h := res.Receipt.Halt
			if h == nil {
				t.Fatalf("status %s, want a HALT", res.Receipt.Status)
			}
			var ids []string
			for _, s := range pkg.Spine.Steps {
				ids = append(ids, s.ID)
			}
			if !slices.Contains(ids, h.RestartPoint) {
				t.Errorf("halt restart point %q is not a step of the spine %v", h.RestartPoint, ids)
			}
			wantOK(t, verifyOf(t, st, res.ReceiptCID, trusted))
		})
	}
}

// failingHas is a store whose Has fails.
type failingHas struct{ cas.Store }

var errStoreDown = errors.New("store is down")

func (failingHas) Has(context.Context, cid.Cid) (bool, error) { return false, errStoreDown }

// A store that cannot say whether it holds the package is a store error,
// not a missing package.
func TestRunPackageLookupFails(t *testing.T) {
	pkg, err := haygent.Load(filepath.Join(fixtures, "haygents", "echo"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = haygent.Run(context.Background(), pkg, map[string]any{"value": 1}, haygent.Options{
		Store: failingHas{memstore.New()}, Key: verifyKey, PackageCID: cas.Sum(cas.DagCBOR, []byte("package")),
	})
	if !errors.Is(err, errStoreDown) || strings.Contains(err.Error(), "not in the store") {
		t.Fatalf("Run = %v, want the store's error", err)
	}
}

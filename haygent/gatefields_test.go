package haygent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/gate"
	"github.com/haygent/hg/haygent/ledger"
)

// TestGateLintKnowsEvidenceTypes: the gate lint probes a field of a kind
// of evidence only with values of the type gate.FieldType names, so that
// type must be the one the runtime records. Runs producing exit, digest,
// read and approval evidence are checked field by field.
func TestGateLintKnowsEvidenceTypes(t *testing.T) {
	now := fixedClock()
	runs := []struct {
		dir   string
		input map[string]any
		ws    map[string]string
	}{
		{filepath.Join("testdata", "bench", "exectrue"), map[string]any{}, nil},
		{filepath.Join(fixtures, "haygents", "roundtrip"), map[string]any{}, map[string]string{"data.bin": "some bytes"}},
		{filepath.Join(fixtures, "haygents", "echo"), map[string]any{"value": "v"}, nil},
		{filepath.Join(fixtures, "haygents", "reader"), map[string]any{"path": "in.txt"}, map[string]string{"in.txt": "text"}},
		{filepath.Join(fixtures, "haygents", "approver"), approvalInput(t, "ship it", "ship it", "approver.key", now.Add(-time.Minute), time.Hour), nil},
	}
	seen := map[string]int{}
	for _, r := range runs {
		pkg, err := haygent.Load(r.dir)
		if err != nil {
			t.Fatal(err)
		}
		ws := t.TempDir()
		for name, content := range r.ws {
			if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		st := memstore.New()
		res, err := haygent.Run(context.Background(), pkg, r.input, haygent.Options{Store: st, Key: verifyKey, Workspace: ws, Now: fixedClock})
		if err != nil {
			t.Fatalf("%s: %v", r.dir, err)
		}
		for _, l := range res.Receipt.Evidence {
			var ev ledger.Evidence
			loadObject(t, st, l.Cid, &ev)
			for f, v := range ev.Data {
				want := gate.FieldType(ev.Kind, f)
				if want == "" {
					continue // probed with values of every type
				}
				seen[ev.Kind]++
				if got := typeOf(v); got != want {
					t.Errorf("%s: %s evidence field %q holds %s (%#v); the gate lint probes it as %s", r.dir, ev.Kind, f, got, v, want)
				}
			}
		}
	}
	for _, kind := range []string{"exit", "digest", "read", "approval"} {
		if seen[kind] == 0 {
			t.Errorf("no %s evidence field was checked (%v)", kind, seen)
		}
	}
}

// typeOf names a Data value's type as gate.FieldType does.
func typeOf(v any) string {
	switch x := v.(type) {
	case bool:
		return "bool"
	case int64:
		return "int"
	case string:
		return "string"
	case []any:
		for _, e := range x {
			if _, ok := e.(string); !ok {
				return fmt.Sprintf("a list holding %T", e)
			}
		}
		return "list of string"
	}
	return fmt.Sprintf("%T", v)
}

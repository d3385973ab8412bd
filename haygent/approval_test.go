package haygent_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/verify"
)

// approvalInput is the approver fixture's input: value, and an approval
// of it made with key material from fixtures/keys.
func approvalInput(t *testing.T, value any, approved any, keyFile string, issued time.Time, ttl time.Duration) map[string]any {
	t.Helper()
	key, err := ledger.LoadKey(filepath.Join(fixtures, "keys", keyFile))
	if err != nil {
		t.Fatal(err)
	}
	a, err := ledger.NewApproval(key, ledger.SubjectDigest(approved), ledger.DecisionApprove, issued, ttl)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	b, _ := json.Marshal(a)
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return map[string]any{"value": value, "approval": doc}
}

func TestApprovals(t *testing.T) {
	dir := filepath.Join(fixtures, "haygents", "approver")
	now := fixedClock()
	for _, tt := range []struct {
		name   string
		input  func(t *testing.T) map[string]any
		status string
		reason string // in the approval evidence, when it does not count
	}{
		{"current approval of the value", func(t *testing.T) map[string]any {
			return approvalInput(t, "ship it", "ship it", "approver.key", now.Add(-time.Minute), time.Hour)
		}, ledger.StatusPass, ""},
		{"expired", func(t *testing.T) map[string]any {
			return approvalInput(t, "ship it", "ship it", "approver.key", now.Add(-2*time.Hour), time.Hour)
		}, ledger.StatusHalt, "expired at"},
		{"not yet issued", func(t *testing.T) map[string]any {
			return approvalInput(t, "ship it", "ship it", "approver.key", now.Add(time.Hour), time.Hour)
		}, ledger.StatusHalt, "before it was issued"},
		{"another value", func(t *testing.T) map[string]any {
			return approvalInput(t, "ship that", "ship it", "approver.key", now.Add(-time.Minute), time.Hour)
		}, ledger.StatusHalt, "but the step saw"},
		{"signature altered", func(t *testing.T) map[string]any {
			in := approvalInput(t, "ship it", "ship it", "approver.key", now.Add(-time.Minute), time.Hour)
			in["approval"].(map[string]any)["expires_at"] = "2099-01-01T00:00:00Z" // stretched by hand
			return in
		}, ledger.StatusHalt, "does not verify"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := memstore.New()
			res := runHaygent(t, st, dir, runOpts{input: tt.input(t)})
			if res.Receipt.Status != tt.status {
				t.Fatalf("status %s, want %s", res.Receipt.Status, tt.status)
			}
			ev := approvalEvidence(t, st, res.Receipt)
			if valid := ev.Data["valid"].(bool); valid != (tt.reason == "") || !strings.Contains(ev.Data["reason"].(string), tt.reason) {
				t.Errorf("evidence valid=%v reason %q; want reason containing %q", valid, ev.Data["reason"], tt.reason)
			}
			// The runtime was honest either way: the receipt verifies,
			// approvals included.
			v := verifyOf(t, st, res.ReceiptCID, trusted)
			wantOK(t, v, verify.CheckApprovals)
		})
	}

	t.Run("approver not in the manifest", func(t *testing.T) {
		stranger := copyPackage(t, "approver", map[string]string{"haygent.manifest.json": `{
			"name": "approver", "version": "1.0.0", "objective": "o", "stakes": "high", "repair_budget": 0,
			"timeouts": {"step": "10s", "run": "1m"}, "slots": {},
			"approvers": ["` + ledger.FormatPublicKey(verifyPub) + `"]}`})
		st := memstore.New()
		res := runHaygent(t, st, stranger, runOpts{input: approvalInput(t, "x", "x", "approver.key", now.Add(-time.Minute), time.Hour)})
		if res.Receipt.Status != ledger.StatusHalt {
			t.Fatalf("status %s, want HALT", res.Receipt.Status)
		}
		if ev := approvalEvidence(t, st, res.Receipt); !strings.Contains(ev.Data["reason"].(string), "not among the package's approvers") {
			t.Errorf("reason %q", ev.Data["reason"])
		}
	})
}

// TestVerifyApprovalUsedLate is a runner that used an approval after it
// expired and recorded it as valid, then signed with a trusted key: the
// verifier checks the window itself and refuses.
func TestVerifyApprovalUsedLate(t *testing.T) {
	st := memstore.New()
	now := fixedClock()
	res := runHaygent(t, st, filepath.Join(fixtures, "haygents", "approver"),
		runOpts{input: approvalInput(t, "ship it", "ship it", "approver.key", now.Add(-time.Minute), 10*time.Minute)})
	if res.Receipt.Status != ledger.StatusPass {
		t.Fatalf("fixture run: %s", res.Receipt.Status)
	}
	r := loadReceipt(t, st, res.ReceiptCID)
	ts, _ := chainOf(t, st, r)
	var ev ledger.Evidence
	loadObject(t, st, ts[0].Evidence[0].Cid, &ev)
	ev.ObservedAt = now.Add(time.Hour).Format(time.RFC3339Nano) // used an hour later, still "valid"
	forged := cas.Link{Cid: putObject(t, st, &ev)}
	ts[0].Evidence = []cas.Link{forged}
	r.Evidence[0] = forged
	v := verifyOf(t, st, relink(t, st, r, ts), trusted)
	wantPassed(t, v, verify.CheckSignature)
	wantFailed(t, v, verify.CheckApprovals, "seq 0 (step approve)", "recorded as a valid approval", "expired at")
}

func approvalEvidence(t *testing.T, st *memstore.Store, r *ledger.Receipt) ledger.Evidence {
	t.Helper()
	for _, l := range r.Evidence {
		var ev ledger.Evidence
		loadObject(t, st, l.Cid, &ev)
		if ev.Kind == "approval" {
			return ev
		}
	}
	t.Fatal("no approval evidence")
	return ledger.Evidence{}
}

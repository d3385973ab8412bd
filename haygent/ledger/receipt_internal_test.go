package ledger

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"testing"

	"github.com/haygent/hg/cas"
)

// receipts returns receipts with every combination of the optional
// entries, so that the encoded map has 22 to 26 entries: both widths of
// the map's head, before and after the signature is added.
func receipts() []*Receipt {
	link := cas.Link{Cid: cas.Sum(cas.Raw, []byte("x"))}
	var out []*Receipt
	for mask := range 8 {
		r := &Receipt{
			Type: TypeReceipt, Run: "run-1", Objective: "o", Haygent: "h@1", Package: link, Input: link,
			Permissions: link, Used: []string{}, Denied: []Denied{}, Steps: []StepRun{}, SlotCalls: []cas.Link{},
			Evidence: []cas.Link{link}, Gates: []cas.Link{}, Artifacts: []Artifact{}, Limitations: []string{},
			Head: link, Transitions: 1, Status: StatusPass, Replay: "hg replay run-1",
			StartedAt: "2026-01-01T00:00:00Z", FinishedAt: "2026-01-01T00:00:01Z",
		}
		if mask&1 != 0 {
			r.Workspace = &link
		}
		if mask&2 != 0 {
			r.Output = &link
		}
		if mask&4 != 0 {
			r.Status = StatusHalt
			r.Halt = &Halt{FailedGate: "g", Verdict: "FAIL", Reason: "r", LastEvidence: []cas.Link{}}
		}
		out = append(out, r)
	}
	return out
}

// The signed receipt's bytes made by adding the signature's entry to the
// signing bytes are the bytes encoding the signed receipt gives; and the
// signing bytes cut back out of them verify as the encoded ones do.
func TestSignEncodedIsTheEncoding(t *testing.T) {
	key := newKey(t)
	for i, r := range receipts() {
		data, err := r.SignEncoded(key, NewSignatures())
		if err != nil {
			t.Fatal(err)
		}
		want, err := cas.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, want) {
			t.Fatalf("receipt %d: signEncoded = %x, encoding = %x", i, data, want)
		}
		if err := r.VerifyEncodedSignature(data, nil); err != nil {
			t.Fatalf("receipt %d: %v", i, err)
		}
		// Any change to what was signed is caught, whichever way the
		// signing bytes are made.
		r.Objective = "changed"
		changed, err := cas.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.VerifyEncodedSignature(changed, nil); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("receipt %d: a changed receipt verifies from its bytes: %v", i, err)
		}
		if err := r.VerifySignature(nil); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("receipt %d: a changed receipt verifies: %v", i, err)
		}
	}
}

// Unsigned receipts, whose bytes have no signature entry, fail as
// VerifySignature fails them.
func TestVerifyEncodedSignatureUnsigned(t *testing.T) {
	r := receipts()[0]
	r.Signer = newKey(t).Public().(ed25519.PublicKey)
	data, err := cas.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.VerifyEncodedSignature(data, nil); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("an unsigned receipt: %v", err)
	}
}

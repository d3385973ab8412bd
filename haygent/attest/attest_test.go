package attest_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/attest"
	"github.com/haygent/hg/haygent/verify"
	v1 "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"
)

// pubKey verifies for the DSSE library with a bare ed25519 public key.
type pubKey struct {
	pub ed25519.PublicKey
	id  string
}

func (k pubKey) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(k.pub, data, sig) {
		return errors.New("bad signature")
	}
	return nil
}
func (k pubKey) KeyID() (string, error)   { return k.id, nil }
func (k pubKey) Public() crypto.PublicKey { return k.pub }

// runFixture runs the named fixture Haygent on input into st, signed with
// key, and returns its receipt's verification against key.
func runFixture(t testing.TB, st cas.Store, key ed25519.PrivateKey, name string, input map[string]any) *verify.Verification {
	t.Helper()
	ctx := context.Background()
	pkg, err := haygent.Load(filepath.Join("..", "..", "fixtures", "haygents", name))
	if err != nil {
		t.Fatal(err)
	}
	res, err := haygent.Run(ctx, pkg, input, haygent.Options{Store: st, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	v, err := verify.VerifyReceipt(ctx, st, res.ReceiptCID, []ed25519.PublicKey{key.Public().(ed25519.PublicKey)})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSignedStatementVerifiesWithLibraries: a statement Build makes of a
// verified PASS, signed by Sign, verifies with the DSSE library and
// validates with the in-toto library; its artifact subject is the sha256
// of the content written; building and signing again gives the same
// bytes.
func TestSignedStatementVerifiesWithLibraries(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	v := runFixture(t, st, key, "writer", map[string]any{"text": "made here"})
	if !v.OK() {
		t.Fatalf("the fixture's receipt does not verify: %+v", v.FirstFailure())
	}
	envelope := func() []byte {
		stmt, err := attest.Build(ctx, st, attest.Target{Verification: v, Trusted: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}})
		if err != nil {
			t.Fatal(err)
		}
		env, err := attest.Sign(ctx, stmt, attest.NewSigner(key))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := attest.WriteJSONLines(&buf, []*attest.Envelope{env}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	first := envelope()
	if again := envelope(); !bytes.Equal(first, again) {
		t.Errorf("the same receipt and key gave two envelopes:\n%s\n%s", first, again)
	}
	env := envelopesFromLines(t, first)
	// The keyid worked out here, not by hg: the key's text form.
	id := "ed25519:" + base64.RawURLEncoding.EncodeToString(key.Public().(ed25519.PublicKey))
	ev, err := dsse.NewEnvelopeVerifier(pubKey{key.Public().(ed25519.PublicKey), id})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ev.Verify(ctx, env); err != nil {
		t.Fatalf("DSSE library: %v", err)
	}
	body, err := env.DecodeB64Payload()
	if err != nil {
		t.Fatal(err)
	}
	var s v1.Statement
	if err := protojson.Unmarshal(body, &s); err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatalf("in-toto library: %v", err)
	}
	sum := sha256.Sum256([]byte("made here\n"))
	var found bool
	for _, sub := range s.GetSubject() {
		found = found || sub.GetName() == "out/result.txt" && sub.GetDigest()["sha256"] == hex.EncodeToString(sum[:])
	}
	if !found {
		t.Errorf("no subject out/result.txt with the sha256 of its content: %v", s.GetSubject())
	}
}

// envelopesFromLines parses one line of JSON Lines as a DSSE envelope.
func envelopesFromLines(t *testing.T, data []byte) *dsse.Envelope {
	t.Helper()
	var env dsse.Envelope
	if err := json.Unmarshal(bytes.TrimSuffix(data, []byte("\n")), &env); err != nil {
		t.Fatal(err)
	}
	return &env
}

// TestBuildRefuses: Build attests nothing a verifier did not establish:
// no verification, one with a failed check (an untrusted signer), a
// failed check of a run's besides the receipt's, and a HALT that
// verifies are each refused with their error.
func TestBuildRefuses(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{8}, 32))
	good := runFixture(t, st, key, "writer", map[string]any{"text": "x"})
	untrusted, err := verify.VerifyReceipt(ctx, st, good.Receipt, nil)
	if err != nil {
		t.Fatal(err)
	}
	halt := runFixture(t, st, key, "fail", map[string]any{"value": 1})
	if !halt.OK() || halt.Status != "HALT" {
		t.Fatalf("the fail fixture: status %s, ok %v", halt.Status, halt.OK())
	}
	for name, c := range map[string]struct {
		t    attest.Target
		want error
	}{
		"no verification":      {attest.Target{}, attest.ErrNotVerified},
		"untrusted signer":     {attest.Target{Verification: untrusted}, attest.ErrNotVerified},
		"a run check failed":   {attest.Target{Verification: good, Checks: append(append([]verify.Check{}, good.Checks...), verify.Check{Name: "acceptance", Detail: "rejected"})}, attest.ErrNotVerified},
		"a HALT that verifies": {attest.Target{Verification: halt}, attest.ErrNotPass},
	} {
		if _, err := attest.Build(ctx, st, c.t); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	if _, err := attest.Build(ctx, st, attest.Target{Verification: good}); err != nil {
		t.Errorf("the verified PASS: %v", err)
	}
}

package attest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"

	"github.com/haygent/hg/haygent/ledger"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// PayloadType is the DSSE payload type of an in-toto statement.
const PayloadType = "application/vnd.in-toto+json"

// Envelope is a DSSE envelope (go-securesystemslib's dsse.Envelope).
type Envelope = dsse.Envelope

// Signer signs DSSE envelopes with an ed25519 key; its keyid is the key's
// hg text form, ed25519:<base64url>. It is a dsse.SignerVerifier.
type Signer struct {
	key ed25519.PrivateKey
}

// NewSigner returns a Signer for key.
func NewSigner(key ed25519.PrivateKey) *Signer { return &Signer{key: key} }

// Sign signs data (the DSSE pre-authentication encoding).
func (s *Signer) Sign(_ context.Context, data []byte) ([]byte, error) {
	return ed25519.Sign(s.key, data), nil
}

// Verify checks sig over data with the signer's public key.
func (s *Signer) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(s.key.Public().(ed25519.PublicKey), data, sig) {
		return errors.New("ed25519: signature does not verify")
	}
	return nil
}

// KeyID is the public key's text form, as 'hg key show' prints it.
func (s *Signer) KeyID() (string, error) {
	return ledger.FormatPublicKey(s.key.Public().(ed25519.PublicKey)), nil
}

// Public is the public key.
func (s *Signer) Public() crypto.PublicKey { return s.key.Public() }

// Sign encodes st and signs it into a DSSE envelope with s. The same
// statement and key give the same envelope, byte for byte (ed25519 is
// deterministic).
func Sign(ctx context.Context, st *Statement, s *Signer) (*Envelope, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // a gate's "ev.size > 0" reads as written
	if err := enc.Encode(st); err != nil {
		return nil, err
	}
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	es, err := dsse.NewEnvelopeSigner(s)
	if err != nil {
		return nil, err
	}
	return es.SignPayload(ctx, PayloadType, body)
}

// WriteJSONLines writes each envelope as one line of JSON.
func WriteJSONLines(w io.Writer, envs []*Envelope) error {
	for _, e := range envs {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			return err
		}
	}
	return nil
}

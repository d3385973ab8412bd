package ledger

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// keyPrefix starts the text form of a public key.
const keyPrefix = "ed25519:"

// ErrNoKey is returned by [LoadKey] when there is no key file.
var ErrNoKey = errors.New("no signing key")

// GenerateKey writes a new ed25519 signing key to path (mode 0600) and
// returns it. It refuses to overwrite a key.
func GenerateKey(path string) (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("a key already exists at %s", path)
	}
	if err != nil {
		return nil, err
	}
	_, err = fmt.Fprintf(f, "hg ed25519 seed %s\n", base64.StdEncoding.EncodeToString(priv.Seed()))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	return priv, nil
}

// LoadKey reads a signing key written by [GenerateKey].
func LoadKey(path string) (ed25519.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w at %s", ErrNoKey, path)
	}
	if err != nil {
		return nil, err
	}
	text, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "hg ed25519 seed ")
	seed, derr := base64.StdEncoding.DecodeString(text)
	if !ok || derr != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%s is not an hg signing key", path)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// FormatPublicKey returns the text form of a public key: "ed25519:" and
// its unpadded base64url.
func FormatPublicKey(pub ed25519.PublicKey) string {
	return keyPrefix + base64.RawURLEncoding.EncodeToString(pub)
}

// ParsePublicKey parses the text form written by [FormatPublicKey].
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	text, ok := strings.CutPrefix(strings.TrimSpace(s), keyPrefix)
	b, err := base64.RawURLEncoding.DecodeString(text)
	if !ok || err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%q is not an ed25519 public key (want ed25519:<base64url>)", s)
	}
	return ed25519.PublicKey(b), nil
}

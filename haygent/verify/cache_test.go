package verify_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"path/filepath"
	"testing"

	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/verify"
)

// What a verification remembers lives in the Cache its caller gave it, and
// nowhere else: the runtime's signature lands in the cache it was handed,
// a verification with that cache fills it with the package's gates, and a
// verification with another cache, or none, starts from nothing and still
// decides the same.
func TestCacheIsTheCallers(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	pkg, err := haygent.Load(filepath.Join("..", "..", "fixtures", "haygents", "echo"))
	if err != nil {
		t.Fatal(err)
	}
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, 32))
	trusted := []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
	mine, other := verify.NewCache(), verify.NewCache()
	res, err := haygent.Run(ctx, pkg, map[string]any{"value": 1}, haygent.Options{Store: st, Key: key, Signatures: mine.Signatures()})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := mine.Signatures().Len(); n != 1 {
		t.Fatalf("the runtime left %d signatures in the cache it was given, want 1", n)
	}
	if n, _ := other.Signatures().Len(); n != 0 {
		t.Fatalf("another cache holds %d signatures", n)
	}
	for name, cache := range map[string]*verify.Cache{"mine": mine, "other": other, "none": nil} {
		v, err := verify.VerifyReceiptKnown(ctx, st, res.ReceiptCID, trusted, nil, cache)
		if err != nil || !v.OK() {
			t.Fatalf("%s: %v %+v", name, err, v.FirstFailure())
		}
	}
	for name, cache := range map[string]*verify.Cache{"mine": mine, "other": other} {
		if pkgs, compiled := cache.Len(); pkgs != 1 || compiled != 1 {
			t.Errorf("%s: %d packages, %d gate files cached; want 1 and 1", name, pkgs, compiled)
		}
		if n, _ := cache.Signatures().Len(); n != 1 {
			t.Errorf("%s: %d signatures cached, want 1", name, n)
		}
	}
	// A verifier that shares nothing refuses an untrusted signer whatever
	// another cache has seen.
	stranger := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{4}, 32))
	v, err := verify.VerifyReceiptKnown(ctx, st, res.ReceiptCID, []ed25519.PublicKey{stranger.Public().(ed25519.PublicKey)}, nil, mine)
	if err != nil {
		t.Fatal(err)
	}
	if v.OK() {
		t.Fatal("a receipt verifies against a key that did not sign it")
	}
}

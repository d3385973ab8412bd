package haygent_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"

	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
)

// TestStepCannotPoisonBuildCache: the shared Go build cache is read-only
// to a step, so no step can plant what a later step compiles.
func TestStepCannotPoisonBuildCache(t *testing.T) {
	pkg, err := haygent.Load(filepath.Join(fixtures, "haygents", "escaper"))
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	poison := filepath.Join(cache, "gocache", "poison-a")
	ws := t.TempDir()
	if err := os.CopyFS(ws, os.DirFS(filepath.Join(fixtures, "workspaces", "escaper"))); err != nil {
		t.Fatal(err)
	}
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	res, err := haygent.Run(context.Background(), pkg, map[string]any{"attempt": "write", "target": poison},
		haygent.Options{Store: memstore.New(), Key: key, Workspace: ws, CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if res.Receipt.Status != ledger.StatusHalt {
		t.Errorf("status %s, want HALT", res.Receipt.Status)
	}
	if _, err := os.Stat(poison); err == nil {
		t.Errorf("the step wrote %s", poison)
	}
}

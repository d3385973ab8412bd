package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"path/filepath"

	"github.com/haygent/hg/cas/boltstore"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/internal/tamper"
	"github.com/ipfs/go-cid"
	"github.com/rogpeppe/go-internal/testscript"
)

// tamper KIND PIN NEWPIN [DONORPIN]: damage the receipt pinned as PIN the
// way KIND says (see internal/tamper), re-signing with the store's own
// runner key (trusted) or, for forge-pass, with a stranger's, and pin the
// receipt to verify as NEWPIN.
func cmdTamper(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 3 || len(args) > 4 {
		ts.Fatalf("usage: tamper KIND PIN NEWPIN [DONORPIN]")
	}
	ctx := context.Background()
	dir := storeDir(ts)
	st, err := boltstore.Open(dir, nil)
	ts.Check(err)
	defer st.Close()
	pinned := func(name string) cid.Cid {
		c, err := st.Pin(ctx, name)
		ts.Check(err)
		return c
	}
	key, err := ledger.LoadKey(filepath.Join(dir, "keys", "runner.key"))
	ts.Check(err)
	if args[0] == "forge-pass" {
		_, key, err = ed25519.GenerateKey(rand.Reader)
		ts.Check(err)
	}
	var donor cid.Cid
	if len(args) == 4 {
		donor = pinned(args[3])
	}
	c, err := tamper.Apply(ctx, st, args[0], pinned(args[1]), donor, key)
	ts.Check(err)
	ts.Check(st.SetPin(ctx, args[2], c))
}

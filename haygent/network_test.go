package haygent_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/report"
)

// TestNetworkGrantReachesHost: a step granted network:127.0.0.1:PORT
// reaches that port through its proxy, and only through it.
func TestNetworkGrantReachesHost(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles Go code; skipped in -short")
	}
	addr, accepted := countingListener(t)

	dir := filepath.Join(t.TempDir(), "proxyprobe")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(fixtures, "haygents", "proxyprobe"))); err != nil {
		t.Fatal(err)
	}
	permFile := filepath.Join(dir, "permissions.json")
	perms, err := os.ReadFile(permFile)
	if err != nil {
		t.Fatal(err)
	}
	perms = bytes.ReplaceAll(perms, []byte("network:127.0.0.1:9"), []byte("network:"+addr))
	if err := os.WriteFile(permFile, perms, 0o644); err != nil {
		t.Fatal(err)
	}
	pkg, err := haygent.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	unpackTxtar(t, filepath.Join(fixtures, "workspaces", "proxyprobe.txtar"), ws)
	st := memstore.New()
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	res, err := haygent.Run(context.Background(), pkg, map[string]any{"addr": addr}, haygent.Options{Store: st, Key: key, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Receipt; r.Status != ledger.StatusPass || len(r.Denied) != 0 {
		var out bytes.Buffer
		if l, err := ledger.LoadLedger(context.Background(), st, res.ReceiptCID); err == nil {
			report.WriteReport(&out, l)
		}
		t.Fatalf("status %s, denied %v; want PASS and none\n%s", r.Status, r.Denied, out.String())
	}
	if accepted.Load() == 0 {
		t.Error("the granted listener saw no connection")
	}
}

// countingListener listens on a free port of 127.0.0.1 until the test ends
// and counts the connections it accepts.
func countingListener(t *testing.T) (addr string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().String(), accepted
}

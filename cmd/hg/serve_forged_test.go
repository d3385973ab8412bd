package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haygent/hg/cas/boltstore"
	"github.com/haygent/hg/internal/tamper"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
)

// Run records are not signed: a page believes one only as far as hg's
// verification of the run holds. A halted run's record rewritten to say
// every node done, and a done run whose node is given another node's
// receipt (a receipt that verifies alone), show no PASS for the forged
// nodes and no "outcome holds": the pages name the failed check, as
// hg verify RUN does.
func TestServeForgedRecords(t *testing.T) {
	f := newServeFixture(t)
	h := f.handler(t)
	forge := func(run string, root func(map[string]any), node func(map[string]any) bool) {
		t.Helper()
		ctx := context.Background()
		st, err := boltstore.Open(f.dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		rc, err := st.GetRef(ctx, scheduler.RefNamespace, run)
		if err != nil {
			t.Fatal(err)
		}
		c, _, err := tamper.EditRecord(ctx, st, rc, root, node)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SetRef(ctx, scheduler.RefNamespace, run, c); err != nil {
			t.Fatal(err)
		}
	}
	receiptOf := func(run, node string) cid.Cid {
		t.Helper()
		st, err := boltstore.Open(f.dir, &boltstore.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		rec, _, err := scheduler.LoadRecord(context.Background(), st, run)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range rec.Nodes {
			if n.Name == node && n.Receipt != nil {
				return n.Receipt.Cid
			}
		}
		t.Fatalf("run %s: node %s has no receipt", run, node)
		return cid.Undef
	}

	// The halted run, said done, every node done.
	forge("run-halt", func(r map[string]any) { r["status"], r["reason"] = "done", "" },
		func(n map[string]any) bool { n["state"], n["reason"] = "done", ""; return true })
	_, body := getPage(h, "/runs/run-halt")
	if strings.Contains(body, "The outcome holds") || !strings.Contains(body, `id="verify-problem">`) {
		t.Errorf("a halted run said done: the run page believes it")
	}
	_, body = getPage(h, "/runs/run-halt/nodes/probe")
	if strings.Contains(body, `id="receipt-status" class="status">PASS<`) || !strings.Contains(body, `id="node-problem">not verified: acceptance: `) {
		t.Errorf("probe, a HALT said done: its page does not say its acceptance fails")
	}

	// seed's receipt as merge's: it verifies alone, and is not merge's work.
	seed := receiptOf("run-ok", "seed")
	forge("run-ok", nil, func(n map[string]any) bool {
		if n["name"] != "merge" {
			return false
		}
		n["receipt"] = seed
		return true
	})
	code, body := getPage(h, "/runs/run-ok/nodes/merge")
	if code != 200 || strings.Contains(body, `id="receipt-status" class="status">PASS<`) || !strings.Contains(body, `data-verdict="broken">broken: `) {
		t.Errorf("seed's receipt on merge reads PASS or not broken (%d)", code)
	}
	if _, body := getPage(h, "/runs/run-ok"); strings.Contains(body, "The outcome holds") || !strings.Contains(body, `id="verify-problem">merge: `) {
		t.Errorf("the run page of a record splicing seed's receipt into merge does not name merge")
	}
	if _, body := getPage(h, "/receipts/"+seed.String()); !strings.Contains(body, `data-verdict="verified">verified<`) {
		t.Errorf("seed's receipt alone no longer verifies: the forgery test proves nothing")
	}
}

// brokenClient is a client that goes away after n bytes of a response.
type brokenClient struct {
	header http.Header
	n      int
}

func (b *brokenClient) Header() http.Header { return b.header }
func (b *brokenClient) WriteHeader(int)     {}
func (b *brokenClient) Write(p []byte) (int, error) {
	if b.n -= len(p); b.n < 0 {
		return 0, errors.New("connection reset by peer")
	}
	return len(p), nil
}

// A download whose client goes away (a cancelled download, an <img> of
// another site's page) leaves the store closed: hg run can have it at
// once, with no wait for a lock the server kept.
func TestServeAbortedDownloadReleasesStore(t *testing.T) {
	f := newServeFixture(t)
	h := f.handler(t)
	big := filepath.Join(t.TempDir(), "big.bin")
	if err := os.WriteFile(big, bytes.Repeat([]byte("0123456789abcdef"), 1<<18), 0o644); err != nil { // 4 MiB
		t.Fatal(err)
	}
	out, errOut, code := f.hg("put", big)
	if code != 0 {
		t.Fatalf("put: %d %s", code, errOut)
	}
	func() {
		defer func() {
			if r := recover(); r != http.ErrAbortHandler {
				t.Fatalf("an aborted download: recovered %v, want http.ErrAbortHandler", r)
			}
		}()
		h.ServeHTTP(&brokenClient{header: http.Header{}, n: 100_000}, httptest.NewRequest(http.MethodGet, "/files/"+strings.TrimSpace(out), nil))
	}()
	st, err := boltstore.Open(f.dir, &boltstore.Options{Timeout: -1}) // for writing, without waiting
	if err != nil {
		t.Fatalf("the store after an aborted download: %v", err)
	}
	st.Close()
}

// Clients asking for pages back to back, in parallel, leave hg run its
// turn at the store: pages hold bbolt's shared lock one at a time, with a
// gap a writer's tries for the lock land in.
func TestServeWritersGetTheStore(t *testing.T) {
	f := newServeFixture(t)
	h := f.handler(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, p := range []string{"/metrics", "/runs/run-ok", "/runs/run-halt/nodes/probe"} {
					getPage(h, p)
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(200 * time.Millisecond) // the pages are under way
	for i := range 3 {
		st, err := boltstore.Open(f.dir, &boltstore.Options{Timeout: 3 * time.Second})
		if err != nil {
			t.Fatalf("open %d for writing while pages are served: %v", i, err)
		}
		st.Close()
	}
}

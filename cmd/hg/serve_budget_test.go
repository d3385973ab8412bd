//go:build unix

package main

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/boltstore/boltstoretest"
	"github.com/haygent/hg/web"
)

// TestServeVerifyingBitByBit: the page of the last node of a chain whose
// verification does not fit in a page's budget answers 202, "verifying",
// with no verdict and no status, and reloads; each reload goes on from
// what the server checked, and the verdict comes within as many reloads
// as the chain is long: verified for an intact chain, broken, naming the
// damaged receipt, for a chain with one damaged. Never PASS before.
func TestServeVerifyingBitByBit(t *testing.T) {
	const n = 30
	dir := serveBenchStore(t, "chain", n)
	last := "/runs/run-10k/nodes/n00029"
	// follow loads target from a new server whose budget is spent at
	// once, until it answers 200, and returns the page and the loads.
	follow := func(t *testing.T) (string, int) {
		t.Helper()
		cfg := serveConfig(dir, "", nil)
		cfg.VerifyBudget = time.Nanosecond
		srv, err := web.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for loads := 1; loads <= n+2; loads++ {
			code, body := getPage(srv, last)
			switch code {
			case http.StatusOK:
				return body, loads
			case http.StatusAccepted:
				if !strings.Contains(body, `<meta http-equiv="refresh" content="0">`) || !strings.Contains(body, `id="verifying"`) ||
					strings.Contains(body, "PASS") || strings.Contains(body, "data-verdict") {
					t.Fatalf("load %d: a verifying page that says more, or does not reload:\n%s", loads, body)
				}
			default:
				t.Fatalf("load %d: %d\n%s", loads, code, body)
			}
		}
		t.Fatalf("no verdict after %d loads", n+2)
		return "", 0
	}
	body, loads := follow(t)
	t.Logf("verified after %d loads", loads)
	if loads < 2 || !strings.Contains(body, `data-verdict="verified"`) || !strings.Contains(body, `id="receipt-status" class="status">PASS<`) {
		t.Fatalf("after %d loads: not verified", loads)
	}

	// n00010's receipt damaged on disk.
	_, receipts := runRecord(t, dir, "run-10k")
	damaged, err := cas.ParseCID(receipts["n00010"])
	if err != nil {
		t.Fatal(err)
	}
	if err := boltstoretest.Corrupt(dir, damaged, 10); err != nil {
		t.Fatal(err)
	}
	body, _ = follow(t)
	m := regexp.MustCompile(`data-verdict="broken">broken: upstream receipts: ([^<]*)<`).FindStringSubmatch(body)
	if m == nil || !strings.Contains(m[1], damaged.String()) || strings.Contains(body, `id="receipt-status" class="status">PASS<`) {
		t.Fatalf("with %s damaged: not broken by it", damaged)
	}
}

// TestServeVerifyingInBrowser: in a browser, the page of the last node of
// a chain that takes many loads to verify reloads itself (no script: the
// page's refresh) until it shows the verdict, verified, with PASS.
func TestServeVerifyingInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser")
	}
	dir := serveBenchStore(t, "chain", 30)
	cfg := serveConfig(dir, "", nil)
	cfg.VerifyBudget = time.Nanosecond
	srv, err := web.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	b := newBrowser(t)
	b.do("open the last node, and wait for its verdict", chromedp.Navigate(ts.URL+"/runs/run-10k/nodes/n00029"),
		chromedp.WaitVisible(chromedp.CSS(`#receipt [data-verdict="verified"]`)))
	b.shot("verified-after-reloads")
	if status := b.text("#receipt-status"); status != "PASS" {
		b.fatalf("status %q after the reloads", status)
	}
}

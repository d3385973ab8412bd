//go:build unix

package main

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
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
	follow := func(t *testing.T, trusted ...ed25519.PublicKey) (string, int) {
		t.Helper()
		cfg := serveConfig(dir, "", nil)
		cfg.VerifyBudget = time.Nanosecond
		if trusted != nil {
			cfg.Trusted = func() ([]ed25519.PublicKey, error) { return trusted, nil }
		}
		srv, err := web.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		target := last
		refresh := regexp.MustCompile(`<meta http-equiv="refresh" content="0; url=(\?verifying=[0-9]+)">`)
		for loads := 1; loads <= n+2; loads++ {
			code, body := getPage(srv, target)
			switch code {
			case http.StatusOK:
				return body, loads
			case http.StatusAccepted:
				m := refresh.FindStringSubmatch(body)
				if m == nil || m[1] != fmt.Sprintf("?verifying=%d", loads) || !strings.Contains(body, `id="verifying"`) ||
					strings.Contains(body, "PASS") || strings.Contains(body, "data-verdict") {
					t.Fatalf("load %d: a verifying page that says more, or does not reload counting:\n%s", loads, body)
				}
				target = last + m[1]
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

	// Every receipt's signer not trusted: each fails its own checks, and
	// the loads still go on from what the server kept, to the verdict.
	stranger := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	if body, loads := follow(t, stranger); !strings.Contains(body, `data-verdict="broken">broken: upstream receipts: `) || strings.Contains(body, `class="status">PASS<`) {
		t.Fatalf("untrusted chain, after %d loads: not broken by its upstream", loads)
	}

	// A page loaded as the last of the "verifying" loads it may answer
	// verifies whole, however long that takes.
	cfg := serveConfig(dir, "", nil)
	cfg.VerifyBudget = time.Nanosecond
	srv, err := web.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := getPage(srv, last+"?verifying=100"); code != http.StatusOK || !strings.Contains(body, `data-verdict="verified"`) {
		t.Fatalf("the 100th load: %d, not verified", code)
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

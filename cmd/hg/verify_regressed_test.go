package main

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/boltstore"
	"github.com/haygent/hg/cas/boltstore/boltstoretest"
	"github.com/haygent/hg/web"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// TestVerifyReceiptRegressed: a receipt a recheck regressed still
// verifies alone (its signer is trusted again), but hg verify RECEIPT and
// hg report RECEIPT against the store say it regressed, and fail, for the
// receipt and for work built from it; from a bundle, without the store's
// runs, it verifies.
func TestVerifyReceiptRegressed(t *testing.T) {
	s := newStanding(t)
	cases := []struct {
		name, receipt, want string
	}{
		{"regressed in its run", s.regBuild, "receipt " + s.regBuild + ": not regressed: regressed in run run-reg at "},
		{"regressed in a run that took it from the memo", s.srcBuild, "receipt " + s.srcBuild + ": not regressed: regressed in run run-memo at "},
		{"built from a regressed receipt", s.srcCheck, "receipt " + s.srcBuild + ": not regressed: regressed in run run-memo at "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := s.hg("verify", c.receipt)
			if code != exitIntegrity || !strings.Contains(errOut, c.want) {
				t.Errorf("hg verify: exit %d, want %d and %q\n%s%s", code, exitIntegrity, c.want, out, errOut)
			}
			out, errOut, code = s.hg("report", c.receipt)
			if code != exitIntegrity || !strings.Contains(errOut, "not regressed: ") {
				t.Errorf("hg report: exit %d\n%s%s", code, out, errOut)
			}
		})
	}
	// The receipt built from the regressed one fails the check too,
	// naming it.
	if out, _, _ := s.hg("verify", s.srcCheck); !regexp.MustCompile(`FAIL +not regressed +upstream ` + s.srcBuild + ` regressed in run run-memo`).MatchString(out) {
		t.Errorf("hg verify of a receipt built from a regressed one: its own check does not name it\n%s", out)
	}
	// Work no recheck touched.
	if out, errOut, code := s.hg("verify", s.wdBuild); code != 0 || !strings.Contains(out, "not regressed") {
		t.Errorf("hg verify of work no recheck regressed: exit %d\n%s%s", code, out, errOut)
	}
	// A bundle carries no run of the store: the receipt verifies alone.
	bundle := t.TempDir() + "/b.car"
	if out, errOut, code := s.hg("bundle", "export", s.regBuild, "-o", bundle); code != 0 {
		t.Fatalf("bundle export: %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := s.hg("verify", "--bundle", bundle, "--key", s.oldPub); code != 0 || strings.Contains(out, "not regressed") {
		t.Errorf("hg verify --bundle: exit %d\n%s%s", code, out, errOut)
	}
}

// TestServeRegressed: hg serve shows a receipt a recheck regressed, in
// any run of the store, as taken back, never as PASS, with where and why;
// on its own page, as an upstream receipt, and as the work of a node
// whose run still holds it done.
func TestServeRegressed(t *testing.T) {
	s := newStanding(t)
	srv, err := web.New(serveConfig(s.dir, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	statusRE := regexp.MustCompile(`id="receipt-status" class="status">([^<]*)<`)
	page := func(target string) (status, body string) {
		t.Helper()
		code, body := getPage(srv, target)
		m := statusRE.FindStringSubmatch(body)
		if code != http.StatusOK || m == nil {
			t.Fatalf("%s: %d, no status", target, code)
		}
		return m[1], body
	}
	for _, target := range []string{"/receipts/" + s.regBuild, "/receipts/" + s.srcBuild, "/runs/run-src/nodes/build"} {
		status, body := page(target)
		if status != "taken back (a recheck regressed this PASS)" || !strings.Contains(body, `id="regressed">A recheck found that this PASS no longer holds: regressed in run run-`) {
			t.Errorf("%s: status %q, or no word of the regression", target, status)
		}
	}
	// run-src's check is built from the regressed build: its upstream
	// link reads taken back.
	if status, body := page("/receipts/" + s.srcCheck); status != "taken back (built from a PASS a recheck took back)" ||
		!strings.Contains(body, `<span class="status">taken back (a recheck regressed this PASS)</span>`) {
		t.Errorf("check, built from build: status %q, or its upstream link does not read taken back", status)
	}
	if status, body := page("/receipts/" + s.wdBuild); status != "PASS" || strings.Contains(body, `id="regressed"`) {
		t.Errorf("work no recheck regressed: %q", status)
	}
	// The run page's table: run-src's build, done, reads taken back, and
	// the outcome does not hold on it.
	code, body := getPage(srv, "/runs/run-src")
	if code != http.StatusOK || strings.Contains(body, `<span class="status">PASS</span>`) || !strings.Contains(body, `<span class="status">taken back (a recheck regressed this PASS)</span>`) ||
		!strings.Contains(body, `<span class="status">taken back (built from a PASS a recheck took back)</span>`) ||
		strings.Contains(body, "The outcome holds") || !strings.Contains(body, `id="verify-problem">build: not regressed: regressed in run run-memo at `) {
		t.Errorf("run-src's page: %d, a regressed receipt's PASS, or an outcome that holds", code)
	}
	// The same receipt's bytes stored under another hash function: the
	// same receipt, taken back too, by hg verify and the pages.
	alt := storeUnderSHA512(t, s.dir, s.regBuild)
	if out, errOut, code := s.hg("verify", alt); code != exitIntegrity || !strings.Contains(errOut, ": not regressed: regressed in run run-reg at ") {
		t.Errorf("hg verify %s (regBuild under sha2-512): exit %d\n%s%s", alt, code, out, errOut)
	}
	if status, _ := page("/receipts/" + alt); status != "taken back (a recheck regressed this PASS)" {
		t.Errorf("regBuild under sha2-512: status %q", status)
	}
	// run-wd's record damaged on disk: whether it regressed a receipt is
	// not known, and the page of a server that has not read it says so.
	root, _ := runRecord(t, s.dir, "run-wd")
	c, err := cas.ParseCID(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := boltstoretest.Corrupt(s.dir, c, 3); err != nil {
		t.Fatal(err)
	}
	if srv, err = web.New(serveConfig(s.dir, "", nil)); err != nil {
		t.Fatal(err)
	}
	if status, body := page("/receipts/" + s.wdBuild); status == "PASS" || !strings.Contains(body, `id="regressions-unread">Whether a recheck regressed this receipt is not known for run run-wd: its record cannot be read.`) {
		t.Errorf("with a record that cannot be read: status %q, or the record not named", status)
	}
}

// storeUnderSHA512 stores the block c again under a CIDv1 whose multihash
// is sha2-512, and returns that CID.
func storeUnderSHA512(t *testing.T, dir, c string) string {
	t.Helper()
	ctx := context.Background()
	st, err := boltstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	orig, err := cas.ParseCID(c)
	if err != nil {
		t.Fatal(err)
	}
	data, err := st.Get(ctx, orig)
	if err != nil {
		t.Fatal(err)
	}
	alt, err := cid.Prefix{Version: 1, Codec: cid.DagCBOR, MhType: multihash.SHA2_512, MhLength: -1}.Sum(data)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cas.NewBlockWithCID(alt, data)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, b); err != nil {
		t.Fatal(err)
	}
	return alt.String()
}

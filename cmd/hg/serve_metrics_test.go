package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/haygent/hg/metrics"
)

// The metrics page of hg serve shows what hg metrics computes, over
// receipts verified when the page is served: a receipt signed by a key
// the store does not trust takes PASS away on the next page, and the
// page agrees with hg metrics --json.
func TestServeMetricsPage(t *testing.T) {
	f := newServeFixture(t)
	h := f.handler(t)
	totalRE := regexp.MustCompile(`(?s)<table id="metrics-total">.*?<tbody><tr>(.*?)</tr>`)
	cellRE := regexp.MustCompile(`<td>([^<]*)</td>`)
	page := func(target string) map[string]string {
		t.Helper()
		code, body := getPage(h, target)
		m := totalRE.FindStringSubmatch(body)
		if code != http.StatusOK || m == nil {
			t.Fatalf("%s: %d, no total row\n%s", target, code, body)
		}
		cells := cellRE.FindAllStringSubmatch(m[1], -1)
		if len(cells) != len(metrics.Columns) {
			t.Fatalf("%s: %d cells, want %d", target, len(cells), len(metrics.Columns))
		}
		row := map[string]string{}
		for i, c := range cells {
			row[metrics.Columns[i]] = c[1]
		}
		return row
	}
	cli := func() metrics.Metrics {
		t.Helper()
		out, errOut, code := f.hg("metrics", "--json")
		if code != 0 {
			t.Fatalf("hg metrics --json: %d %s", code, errOut)
		}
		var r metrics.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r.Total
	}
	agree := func(row map[string]string, m metrics.Metrics) {
		t.Helper()
		for col, n := range map[string]int{"RECEIPTS": m.Receipts, "UNVERIFIED": m.Unverified, "PASS": m.Pass, "HALT": m.Halt} {
			if row[col] != strconv.Itoa(n) {
				t.Errorf("%s: the page says %s, hg metrics %d", col, row[col], n)
			}
		}
	}
	before := page("/metrics")
	agree(before, cli())
	if before["PASS"] == "0" {
		t.Fatalf("no PASS in a store with a done run: %v", before)
	}

	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize))
	f.rewriteNode(t, "run-ok", "left", other, func(string, map[string]any) {})
	after := page("/metrics")
	agree(after, cli())
	p0, _ := strconv.Atoi(before["PASS"])
	p1, _ := strconv.Atoi(after["PASS"])
	u0, _ := strconv.Atoi(before["UNVERIFIED"])
	u1, _ := strconv.Atoi(after["UNVERIFIED"])
	if p1 >= p0 || u1 <= u0 {
		t.Errorf("a receipt signed by an untrusted key: PASS %d -> %d, unverified %d -> %d; want fewer PASS, more unverified", p0, p1, u0, u1)
	}

	if code, _ := getPage(h, "/metrics?since=yesterday"); code != http.StatusBadRequest {
		t.Errorf("since=yesterday: %d, want 400", code)
	}
	if row := page("/metrics?since=2999-01-01"); row["RECEIPTS"] != "0" {
		t.Errorf("since the year 2999: %s receipts", row["RECEIPTS"])
	}
}

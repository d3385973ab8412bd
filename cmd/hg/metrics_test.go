package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/boltstore"
	"github.com/haygent/hg/metrics"
	"github.com/haygent/hg/scheduler"
)

// A report whose ledger strings are hostile (terminal escapes, a carriage
// return, line breaks, bidi overrides, HTML) and whose numbers are the
// largest there are prints one line per group, with every control
// escaped; its JSON holds the strings exactly.
func TestWriteMetricsEscapesLedgerText(t *testing.T) {
	hostile := "evil\x1b[2K\rstatus PASS\n<script>alert(1)</script>\u202e"
	huge := metrics.Metrics{Receipts: math.MaxInt, Verified: math.MaxInt, Pass: math.MaxInt,
		Repair:       metrics.Repair{RepairsInPass: math.MaxInt64},
		UnverifiedBy: map[string]int{hostile: math.MaxInt},
		ToVerified:   metrics.Durations{Count: math.MaxInt, MedianMS: math.MaxInt64, MaxMS: math.MaxInt64}}
	per := math.MaxFloat64
	huge.Repair.PerPass = &per
	r := &metrics.Report{Trusted: 1,
		Runs: metrics.RunCounts{Listed: 2, Counted: 1,
			Unreadable: []metrics.RunProblem{{Run: hostile, Check: hostile, Detail: hostile}},
			Unverified: []metrics.RunProblem{{Run: hostile, Check: hostile, Detail: hostile}}},
		Total:       huge,
		Haygents:    []metrics.HaygentGroup{{Haygent: hostile, Package: hostile, Metrics: huge}},
		Classes:     []metrics.ClassGroup{{Class: hostile, Runs: math.MaxInt, RunsUnverified: 1, Metrics: huge}},
		NotMeasured: []metrics.NotMeasured{{Metric: hostile, Reason: hostile}},
	}
	var out bytes.Buffer
	if err := writeMetrics(&out, r); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if m := rawControl.FindString(text); m != "" {
		t.Fatalf("raw control %q printed:\n%s", m, text)
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	var rows int
	for _, l := range lines {
		if strings.HasPrefix(l, `evil\x1b[2K\rstatus PASS\n<script>`) {
			rows++
		}
		if strings.HasPrefix(l, "status PASS") || strings.HasPrefix(l, "<script>") {
			t.Errorf("a ledger string began a line of its own: %q", l)
		}
	}
	if rows != 2 { // the Haygent's row and the class's
		t.Errorf("%d rows begin with the escaped name, want 2:\n%s", rows, text)
	}
	if !strings.Contains(text, "9223372036854775807") {
		t.Errorf("the largest count is not printed whole:\n%s", text)
	}

	var js bytes.Buffer
	u := &ui{stdout: &js}
	if err := u.printJSON(r); err != nil {
		t.Fatal(err)
	}
	if bytes.IndexByte(js.Bytes(), 0x1b) >= 0 || bytes.Count(js.Bytes(), []byte("\n")) != 1 {
		t.Fatalf("JSON is not one line without raw controls: %q", js.String())
	}
	var back metrics.Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Haygents[0].Haygent != hostile || back.Classes[0].Class != hostile || back.Total.Repair.RepairsInPass != math.MaxInt64 {
		t.Errorf("JSON did not keep the strings and numbers exactly: %+v", back.Haygents[0])
	}
}

// --since takes RFC 3339 and a date (local midnight); anything else is a
// usage error (exit 2).
func TestParseSince(t *testing.T) {
	if got, err := parseSince("2026-11-01T12:00:00Z"); err != nil || !got.Equal(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("RFC 3339: %v, %v", got, err)
	}
	if got, err := parseSince("2026-11-01"); err != nil || !got.Equal(time.Date(2026, 11, 1, 0, 0, 0, 0, time.Local)) {
		t.Errorf("date: %v, %v", got, err)
	}
	if got, err := parseSince(""); err != nil || !got.IsZero() {
		t.Errorf("empty: %v, %v", got, err)
	}
	for _, bad := range []string{"yesterday", "2026-13-01", "2026-11-01 12:00", "1700000000", "2026-11-01T12:00:00"} {
		if _, err := parseSince(bad); exitCode(err) != exitUsage {
			t.Errorf("--since %q: exit %d (%v), want %d", bad, exitCode(err), err, exitUsage)
		}
	}
}

// A recheck of a record imported from a bundle, which is no run of the
// store (no runs/RUN), that finds it holding records nothing: no recheck
// log that 'hg run rm' could not remove.
func TestRecheckOfAnImportedRecordLogsNothing(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	a, b := filepath.Join(work, "a"), filepath.Join(work, "b")
	hg := func(store string, want int, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if got := run(ctx, append([]string{"--store", store}, args...), strings.NewReader(""), &stdout, &stderr); got != want {
			t.Fatalf("hg %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), got, want, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	hg(a, 0, "init")
	hg(a, 0, "run", "--run-id", "run-a", filepath.Join("..", "..", "fixtures", "workorders", "pipeline.json"))
	var runs []struct {
		Record string `json:"record"`
	}
	if err := json.Unmarshal([]byte(hg(a, 0, "runs", "--json")), &runs); err != nil || len(runs) != 1 {
		t.Fatalf("runs: %v %v", runs, err)
	}
	car := filepath.Join(work, "run.car")
	hg(a, 0, "bundle", "export", "run-a", "-o", car)
	pub := strings.TrimSpace(hg(a, 0, "key", "show"))
	hg(b, 0, "init")
	hg(b, 0, "bundle", "import", car)
	hg(b, 0, "key", "trust", pub)
	out := hg(b, 0, "recheck", runs[0].Record)
	if !strings.Contains(out, "every done node holds") || strings.Contains(out, "recorded as") {
		t.Errorf("recheck of the imported record:\n%s", out)
	}
	if refs := hg(b, 0, "metrics", "--json"); !strings.Contains(refs, `"runs":{"listed":0,`) {
		t.Errorf("metrics of the store the record was imported into: %s", refs)
	}
	st, err := boltstore.Open(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.GetRef(ctx, scheduler.RecheckNamespace, "run-a"); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("a recheck log of no run of the store: %v", err)
	}
	// In the store that holds the run, the same recheck is recorded.
	if out := hg(a, 0, "recheck", "run-a"); !strings.Contains(out, "recorded as recheck ") {
		t.Errorf("recheck of the store's own run:\n%s", out)
	}
}

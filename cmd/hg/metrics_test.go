package main

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/haygent/hg/metrics"
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
		Classes:     []metrics.ClassGroup{{Class: hostile, Runs: math.MaxInt, Metrics: huge}},
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

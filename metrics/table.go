package metrics

import (
	"fmt"
	"time"
)

// Columns are the names of the figures [Metrics.Cells] gives, in order:
// the table hg metrics prints and the page of hg serve shows.
var Columns = []string{"RECEIPTS", "UNVERIFIED", "PASS", "HALT", "FALSE PASS", "RECHECKED", "REPLAYS AGREED",
	"DENIED", "REPAIRS/PASS", "BUDGET HALTS", "HALT INFO", "TO VERIFIED"}

// Cells returns m's figures for [Columns], "-" where there is nothing to
// show; d writes a duration. None holds ledger text.
func (m *Metrics) Cells(d func(time.Duration) string) []string {
	per := "-"
	if m.Repair.PerPass != nil {
		per = fmt.Sprintf("%.2f", *m.Repair.PerPass)
	}
	info := "-"
	if q := m.HaltInfo; q.Halts > 0 {
		info = fmt.Sprintf("%d/%d", q.Complete, q.Halts)
	}
	replays := "-"
	if m.Replayed > 0 {
		replays = fmt.Sprintf("%d/%d", m.ReplayAgreed, m.Replayed)
	}
	n := func(i int) string { return fmt.Sprint(i) }
	return []string{n(m.Receipts), n(m.Unverified), n(m.Pass), n(m.Halt), n(m.FalsePass), n(m.Rechecked), replays,
		n(m.Denied), per, n(m.Repair.BudgetExhausted), info, m.ToVerified.Format(d)}
}

// Format shows a summary as "median (max MAX, N)", or "-" when empty; d
// writes a duration.
func (s Durations) Format(d func(time.Duration) string) string {
	if s.Count == 0 {
		return "-"
	}
	ms := func(n int64) string { return d(time.Duration(n) * time.Millisecond) }
	return fmt.Sprintf("%s (max %s, %d)", ms(s.MedianMS), ms(s.MaxMS), s.Count)
}

// ParseSince reads the start of a period: an RFC 3339 time, or a date
// (midnight, local time); "" is the zero time (every run).
func ParseSince(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02", s, time.Local); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q: want a date (2026-11-01) or an RFC 3339 time (2026-11-01T12:00:00Z)", s)
}

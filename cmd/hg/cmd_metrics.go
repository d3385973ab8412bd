package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/internal/textsafe"
	"github.com/haygent/hg/metrics"
	"github.com/spf13/cobra"
)

func newMetricsCmd(g *globals) *cobra.Command {
	var (
		since  string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "metrics [--since DATE] [--json]",
		Short: "how dependably the store's runs did their work, per Haygent and per Work Order class, from the ledger alone",
		Long: `Compute, from the store's run records and the receipts they hold, per
Haygent (name@version and package CID) and per Work Order class:

  receipts    verified against the keys the store trusts (its runner key
              and 'hg key trust'), as 'hg verify' checks them; a receipt
              that fails a check counts as unverified, by that check, and
              in nothing else: a broken receipt's PASS is never a PASS
  pass, halt  the verified receipts' statuses; a PASS counts only where
              a run stands behind it: a done node's receipt, in a run
              whose every check holds; one withdrawn ('hg withdraw') or
              that no run stands behind is counted apart
  runs        per class, by status where hg's checks establish it: done
              only when 'hg verify' of the run holds; the others counted
              under no status
  false pass  PASS receipts 'hg recheck' regressed (trust withdrawn and
              replays that diverged are counted apart), and their rate
              over the receipts a recorded recheck measured
  replays     of the receipts 'hg recheck --replay' replayed, those whose
              every replay agreed ('hg replay' alone records nothing)
  denied      operations the permissions refused, and HALTs on a denial
  repair      repairs per PASS, PASS at the first try, HALTs after an
              exhausted repair budget
  halt info   HALTs whose receipt names the failed gate, the last
              evidence and a restart point
  to verified from a receipt's start (the runner's clock) to its
              acceptance (the scheduler's); per class, from a done run's
              start to its last acceptance (the scheduler's clock)

Each receipt is counted once, however many runs reuse it (the memo cache).
What the store holds no record of is listed as not measured, with why.
Single invocations ('hg haygent run') belong to no run and are not counted.

--since DATE counts the runs started on or after DATE: 2026-11-01 (local
midnight) or an RFC 3339 time. --json prints the report as one JSON object
(its fields are in SPEC.md, "Metrics").`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := parseSince(since)
			if err != nil {
				return err
			}
			return showMetrics(cmd.Context(), g, t, asJSON)
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "count only the runs started on or after `DATE` (2026-11-01 or RFC 3339)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

// parseSince reads --since: "" is every run.
func parseSince(s string) (time.Time, error) {
	t, err := metrics.ParseSince(s)
	if err != nil {
		return time.Time{}, usageError{fmt.Errorf("--since %w", err)}
	}
	return t, nil
}

func showMetrics(ctx context.Context, g *globals, since time.Time, asJSON bool) error {
	dir, err := locateStore(g.store)
	if err != nil {
		return err
	}
	trusted, err := storeTrust(dir)
	if err != nil {
		return err
	}
	var r *metrics.Report
	if err := g.withStore(true, func(st cas.Store) error {
		var err error
		r, err = metrics.Compute(ctx, st, metrics.Options{Since: since, Trusted: trusted})
		return err
	}); err != nil {
		return err
	}
	if asJSON {
		return g.ui.printJSON(r)
	}
	return writeMetrics(g.ui.stdout, r)
}

// writeMetrics prints a report as tables. Haygent names, classes, run ids
// and details come from the ledger: printed escaped.
func writeMetrics(w io.Writer, r *metrics.Report) error {
	period := "every run"
	if r.Since != "" {
		period = "runs started since " + r.Since
	}
	textsafe.Fprintf(w, "metrics of %s: %s counted of %d, receipts verified against %s\n",
		period, count(r.Runs.Counted, "run"), r.Runs.Listed, count(r.Trusted, "trusted key"))
	if r.Runs.Counted == 0 {
		fmt.Fprintln(w, "no runs to count")
	}
	if len(r.Haygents) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "HAYGENT\tPACKAGE\t"+metricsHeader)
		for _, h := range r.Haygents {
			name := h.Haygent
			if name == "" {
				name = "(unreadable)"
			}
			textsafe.Fprintf(tw, "%s\t%s\t", name, shortCID(h.Package))
			fmt.Fprintf(tw, "%s\n", metricsRow(&h.Metrics))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(r.Classes) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CLASS\tRUNS\tDONE\tRUN TO VERIFIED\t"+metricsHeader)
		for _, c := range r.Classes {
			textsafe.Fprintf(tw, "%s\t", c.Class)
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\n", c.Runs, c.Done, durations(c.RunToVerified), metricsRow(&c.Metrics))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	t := &r.Total
	fmt.Fprintln(w)
	fmt.Fprintf(w, "total: %s, %d verified, %d unverified; %d PASS, %d HALT; false PASS found by recheck %d\n",
		count(t.Receipts, "receipt"), t.Verified, t.Unverified, t.Pass, t.Halt, t.FalsePass)
	if t.FalsePassRate != nil {
		fmt.Fprintf(w, "  false PASS rate %.4f: %d of %s re-measured by hg recheck\n", *t.FalsePassRate, t.FalsePass, count(t.Rechecked, "receipt"))
	}
	if t.ReplayAgreement != nil {
		fmt.Fprintf(w, "  replay agreement %.4f: %d of %s replayed by hg recheck --replay agreed every time\n", *t.ReplayAgreement, t.ReplayAgreed, count(t.Replayed, "receipt"))
	}
	if t.Withdrawn > 0 || t.PassNotHeld > 0 {
		fmt.Fprintf(w, "  verified PASS no run stands behind, not counted as PASS: %d withdrawn (hg withdraw), %d of nodes not done or of runs whose checks fail\n", t.Withdrawn, t.PassNotHeld)
	}
	if t.TrustWithdrawn > 0 || t.ReplayDiverged > 0 {
		fmt.Fprintf(w, "  regressed apart from false PASS: %d on a withdrawn trust, %d on a replay that diverged\n", t.TrustWithdrawn, t.ReplayDiverged)
	}
	if len(t.UnverifiedBy) > 0 {
		checks := make([]string, 0, len(t.UnverifiedBy))
		for c := range t.UnverifiedBy {
			checks = append(checks, c)
		}
		sort.Strings(checks)
		var parts []string
		for _, c := range checks {
			parts = append(parts, textsafe.Sprintf("%s %d", c, t.UnverifiedBy[c]))
		}
		fmt.Fprintf(w, "  unverified, by the first check failed: %s (counted in nothing else)\n", strings.Join(parts, ", "))
	}
	if t.ClockSkew > 0 {
		fmt.Fprintf(w, "  %s accepted before it started (two machines' clocks): left out of TO VERIFIED\n", count(t.ClockSkew, "receipt"))
	}
	for _, c := range r.Classes {
		if c.RunsUnverified > 0 {
			textsafe.Fprintf(w, "class %s: %s counted under no status: their checks do not hold\n", c.Class, count(c.RunsUnverified, "run"))
		}
	}
	for _, p := range r.Runs.Unreadable {
		textsafe.Fprintf(w, "unreadable run %s: %s: %s\n", p.Run, p.Check, p.Detail)
	}
	for _, p := range r.Runs.Unverified {
		textsafe.Fprintf(w, "run %s: %s: %s: its events and rechecks not counted\n", p.Run, p.Check, p.Detail)
	}
	if r.Runs.NoStart > 0 {
		fmt.Fprintf(w, "%s left out: no start time recorded\n", count(r.Runs.NoStart, "run"))
	}
	for _, n := range r.NotMeasured {
		textsafe.Fprintf(w, "not measured: %s: %s\n", n.Metric, n.Reason)
	}
	return nil
}

var metricsHeader = strings.Join(metrics.Columns, "\t")

// metricsRow is the columns of metricsHeader, holding no ledger text.
func metricsRow(m *metrics.Metrics) string {
	return strings.Join(m.Cells(formatElapsed), "\t")
}

// durations shows a summary as "median (max, N)".
func durations(d metrics.Durations) string { return d.Format(formatElapsed) }

// shortCID shows the end of a CID, which is where CIDs differ.
func shortCID(s string) string {
	if len(s) <= 14 {
		return s
	}
	return "..." + s[len(s)-10:]
}

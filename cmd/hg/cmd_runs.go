package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/internal/textsafe"
	"github.com/haygent/hg/scheduler"
	"github.com/spf13/cobra"
)

// runStatuses are the statuses hg runs --status takes: a record's, and
// "unreadable" for a run whose record cannot be read.
var runStatuses = []string{scheduler.StatusRunning, scheduler.StatusDone, scheduler.StatusHalted, scheduler.StatusCancelled, "unreadable"}

// runsFilter chooses the runs hg runs lists.
type runsFilter struct {
	statuses  []string
	workorder string
}

func (f runsFilter) check() error {
	for _, s := range f.statuses {
		if !slices.Contains(runStatuses, s) {
			return usageError{fmt.Errorf("--status %q: want one of %s", s, strings.Join(runStatuses, ", "))}
		}
	}
	return nil
}

func (f runsFilter) keep(r *scheduler.RunInfo) bool {
	status := r.Status
	if r.Err != nil {
		status = "unreadable"
	}
	return (len(f.statuses) == 0 || slices.Contains(f.statuses, status)) && (f.workorder == "" || r.WorkOrder == f.workorder)
}

func newRunsCmd(g *globals) *cobra.Command {
	var (
		f      runsFilter
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "runs [--status S] [--workorder NAME] [--json]",
		Short: "list the store's Work Order runs, newest first",
		Long: `List every run of a Work Order the store holds (every ref runs/RUN), newest
first: its id, Work Order, task class, status, when it started, how long it
took (or has taken so far), and its nodes done of all. 'hg status' with no
argument prints the same list.

A run recorded running that no process executes (the one that did died)
is "interrupted": 'hg resume RUN' goes on. A run whose record cannot be
read is listed all the same, as "unreadable", and named on stderr with
why: a run's id is never lost.

Single Haygent invocations ('hg haygent run') are not runs: no record
names them, and the store keeps one only under the pin given with --pin
('hg pin ls'; 'hg report PIN', 'hg logs PIN').

--status (repeatable, or comma-separated) keeps the runs of those statuses
(running, done, halted, cancelled, unreadable), --workorder those of one
Work Order. 'hg runs prune' removes old runs; 'hg run rm RUN' one run.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			return listRuns(cmd.Context(), g, f, asJSON)
		},
	}
	cmd.Flags().StringSliceVar(&f.statuses, "status", nil, "only runs of this `STATUS` (running, done, halted, cancelled, unreadable)")
	cmd.Flags().StringVar(&f.workorder, "workorder", "", "only runs of the Work Order `NAME`")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	cmd.AddCommand(newRunsPruneCmd(g))
	return cmd
}

// runJSON is one run as hg runs --json prints it.
type runJSON struct {
	Run          string           `json:"run"`
	Record       string           `json:"record"`
	WorkOrder    string           `json:"workorder,omitempty"`
	WorkOrderCID string           `json:"workorder_cid,omitempty"`
	Class        string           `json:"class,omitempty"`
	Status       string           `json:"status"`
	Executing    *bool            `json:"executing,omitempty"`
	Reason       string           `json:"reason,omitempty"`
	Started      string           `json:"started,omitempty"`
	Updated      string           `json:"updated,omitempty"`
	DurationMS   *int64           `json:"duration_ms,omitempty"`
	Nodes        int64            `json:"nodes"`
	Done         int64            `json:"done"`
	States       map[string]int64 `json:"states,omitempty"`
	Trusted      []string         `json:"trusted,omitempty"`
	Error        string           `json:"error,omitempty"`
}

// listRuns prints the store's runs: hg runs, and hg status with no
// argument.
func listRuns(ctx context.Context, g *globals, f runsFilter, asJSON bool) error {
	dir, err := locateStore(g.store)
	if err != nil {
		return err
	}
	return g.withStore(true, func(st cas.Store) error {
		all, err := scheduler.ListRuns(ctx, st)
		if err != nil {
			return err
		}
		var runs []scheduler.RunInfo
		for i := range all {
			if f.keep(&all[i]) {
				runs = append(runs, all[i])
			}
		}
		now := time.Now()
		if asJSON {
			out := []runJSON{}
			for i := range runs {
				r := &runs[i]
				j := runJSON{Run: r.Run, Record: r.Record.String(), Status: "unreadable"}
				if r.Err != nil {
					j.Error = r.Err.Error()
					out = append(out, j)
					continue
				}
				j.WorkOrder, j.WorkOrderCID, j.Class = r.WorkOrder, r.Order.String(), r.Class
				j.Status, j.Reason, j.Started, j.Updated = r.Status, r.Reason, r.Started, r.Updated
				j.Nodes, j.Done, j.States, j.Trusted = r.Nodes, r.Done(), r.States, r.Trusted
				if r.Status == scheduler.StatusRunning {
					executing := runActive(dir, r.Run)
					j.Executing = &executing
				}
				if d, ok := runDuration(r, now, j.Executing != nil && *j.Executing); ok {
					ms := d.Milliseconds()
					j.DurationMS = &ms
				}
				out = append(out, j)
			}
			return g.ui.printJSON(out)
		}
		if len(runs) == 0 {
			if len(all) == 0 {
				g.ui.hintf("no runs in this store: 'hg run WORKORDER.json' starts one; a single Haygent run is kept only under its pin ('hg haygent run --pin NAME', 'hg pin ls')")
			} else {
				g.ui.hintf("none of the store's %d runs matches", len(all))
			}
			return nil
		}
		tw := tabwriter.NewWriter(g.ui.stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "RUN\tWORKORDER\tCLASS\tSTATUS\tSTARTED\tDURATION\tNODES")
		for i := range runs {
			r := &runs[i]
			if r.Err != nil {
				textsafe.Fprintf(tw, "%s\t-\t-\tunreadable\t-\t-\t-\n", r.Run)
				continue
			}
			status, executing := r.Status, false
			if r.Status == scheduler.StatusRunning {
				if executing = runActive(dir, r.Run); !executing {
					status = "interrupted"
				}
			}
			class, started, took := r.Class, "-", "-"
			if class == "" {
				class = "-"
			}
			if t := r.StartedAt(); !t.IsZero() {
				started = t.UTC().Format("2006-01-02 15:04:05Z")
			}
			if d, ok := runDuration(r, now, executing); ok {
				took = formatElapsed(d)
			}
			textsafe.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\n", r.Run, r.WorkOrder, class, status, started, took, r.Done(), r.Nodes)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for i := range runs {
			if r := &runs[i]; r.Err != nil {
				g.ui.warnf("run %s: its record cannot be read: %v", r.Run, r.Err)
			}
		}
		return nil
	})
}

// runDuration is how long a run took: from its start to its record's
// last change, or to now while a process executes it.
func runDuration(r *scheduler.RunInfo, now time.Time, executing bool) (time.Duration, bool) {
	start, end := r.StartedAt(), r.UpdatedAt()
	if executing {
		end = now
	}
	if start.IsZero() || end.IsZero() || end.Before(start) {
		return 0, false
	}
	return end.Sub(start), true
}

// formatElapsed shows a duration as a person reads it: 850ms, 12s, 3m05s,
// 2h07m.
func formatElapsed(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	}
	d = d.Round(time.Minute)
	return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
}

func newRunRmCmd(g *globals) *cobra.Command {
	var force, dryRun bool
	cmd := &cobra.Command{
		Use:   "rm RUN... [--force] [--dry-run]",
		Short: "remove runs from the store; 'hg gc' then frees what nothing else keeps",
		Long: `Remove each RUN from the store: its ref runs/RUN, and a pending cancel
request of it. That is all rm itself removes. Its record, its receipts and
acceptances, its Work Order and packages are blocks that the next 'hg gc'
frees unless something else reaches them: a pin, another run that names
the same receipts (a memo hit names the receipt it reused), or a memo
entry, which keeps its acceptance and receipt until 'hg runs prune --memo'
removes it. rm says how many of the run's acceptances memo entries hold.

A run a process is executing is refused: stop it with 'hg cancel RUN'
first. A run recorded running that no process executes (the one that did
died; 'hg resume RUN' would go on) is refused unless --force, and so is a
run whose record cannot be read. --dry-run says what would be removed.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{errors.New("hg run rm: want one or more RUN ids")}
			}
			for _, a := range args {
				if err := scheduler.CheckRunID(a); err != nil {
					return usageError{err}
				}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := locateStore(g.store)
			if err != nil {
				return err
			}
			return g.withStore(dryRun, func(st cas.Store) error {
				for _, run := range args {
					if err := removeRun(cmd.Context(), g, st, dir, run, scheduler.RemoveOptions{Force: force, DryRun: dryRun}); err != nil {
						return err
					}
				}
				if !dryRun {
					g.ui.printf("'hg gc' frees the blocks that no pin, run or memo entry reaches\n")
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "remove a run recorded running that no process executes, or whose record cannot be read")
	cmd.Flags().BoolVarP(&dryRun, "dry-run", "n", false, "say what would be removed, remove nothing")
	return cmd
}

// removeRun removes one run, holding its lock so that no process starts
// executing it meanwhile, and says what went.
func removeRun(ctx context.Context, g *globals, st cas.Store, dir, run string, opts scheduler.RemoveOptions) error {
	if opts.DryRun {
		if runActive(dir, run) {
			return fmt.Errorf("run %s is being executed: stop it with 'hg cancel %s' first", run, run)
		}
	} else {
		unlock, err := lockRun(dir, run)
		if err != nil {
			return err
		}
		defer unlock()
	}
	rm, err := scheduler.RemoveRun(ctx, st, run, opts)
	if err != nil {
		return err
	}
	verb := "removed"
	if opts.DryRun {
		verb = "would remove"
	}
	if rm.Err != nil {
		g.ui.printSafe("%s run %s (its record %s cannot be read)\n", verb, run, rm.Record)
		return nil
	}
	g.ui.printSafe("%s run %s (%s, %s, started %s): %d nodes, %d receipts\n", verb, run, rm.WorkOrder, rm.Status, rm.Started, rm.Nodes, rm.Receipts)
	if rm.CancelRequest {
		g.ui.printSafe("  and its pending cancel request\n")
	}
	if rm.MemoHeld > 0 {
		g.ui.printSafe("  %d of its acceptances are memo entries, which keep them and their receipts ('hg runs prune --memo' removes old ones)\n", rm.MemoHeld)
	}
	return nil
}

func newRunsPruneCmd(g *globals) *cobra.Command {
	var (
		before, olderThan    string
		memo, dryRun, asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "prune --before DATE | --older-than AGE [--memo] [--dry-run] [--json]",
		Short: "remove the runs (and memo entries) older than a date; 'hg gc' then frees their blocks",
		Long: `Remove every run whose record last changed before a date, as 'hg run rm'
removes one: --before DATE (2026-11-01, midnight local time, or an RFC 3339
time) or --older-than AGE (30d, 2w, 12h, 90m; days are 24 hours). A run
recorded running is never pruned, nor one whose record cannot be read
(neither has an age to trust); both are named.

With --memo, the memo entries whose acceptance was made before the date go
too: the next run that needs their work does it again. Without it the memo
cache keeps the receipts and acceptances its entries name, and gc frees
only what nothing else reaches.

--dry-run lists what would go and removes nothing. Then 'hg gc' frees the
blocks that no pin, run or memo entry reaches.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cutoff, err := pruneCutoff(before, olderThan, time.Now())
			if err != nil {
				return err
			}
			return pruneRuns(cmd.Context(), g, cutoff, memo, dryRun, asJSON)
		},
	}
	cmd.Flags().StringVar(&before, "before", "", "remove runs last changed before `DATE` (2026-11-01 or RFC 3339)")
	cmd.Flags().StringVar(&olderThan, "older-than", "", "remove runs last changed longer than `AGE` ago (30d, 2w, 12h)")
	cmd.Flags().BoolVar(&memo, "memo", false, "also remove the memo entries accepted before that date")
	cmd.Flags().BoolVarP(&dryRun, "dry-run", "n", false, "list what would be removed, remove nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was removed as JSON")
	return cmd
}

// pruneCutoff reads --before or --older-than (exactly one of them).
func pruneCutoff(before, olderThan string, now time.Time) (time.Time, error) {
	switch {
	case before == "" && olderThan == "":
		return time.Time{}, usageError{errors.New("hg runs prune: want --before DATE or --older-than AGE")}
	case before != "" && olderThan != "":
		return time.Time{}, usageError{errors.New("hg runs prune: --before and --older-than: give one")}
	case before != "":
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"} {
			if t, err := time.ParseInLocation(layout, before, time.Local); err == nil {
				return t, nil
			}
		}
		return time.Time{}, usageError{fmt.Errorf("--before %q: want a date (2026-11-01) or an RFC 3339 time (2026-11-01T12:00:00Z)", before)}
	}
	age, err := parseAge(olderThan)
	if err != nil {
		return time.Time{}, usageError{err}
	}
	return now.Add(-age), nil
}

// parseAge reads an age: a Go duration (12h, 90m), or a whole number of
// days (30d) or weeks (2w).
func parseAge(s string) (time.Duration, error) {
	bad := fmt.Errorf("--older-than %q: want an age such as 30d, 2w, 12h or 90m", s)
	if k := len(s) - 1; k > 0 && (s[k] == 'd' || s[k] == 'w') {
		unit := 24 * time.Hour
		if s[k] == 'w' {
			unit *= 7
		}
		n, err := strconv.ParseUint(s[:k], 10, 63)
		if err != nil || n > uint64(math.MaxInt64/unit) {
			return 0, bad
		}
		return time.Duration(n) * unit, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, bad
	}
	return d, nil
}

// pruneJSON is what hg runs prune --json prints.
type pruneJSON struct {
	DryRun  bool          `json:"dry_run"`
	Before  string        `json:"before"`
	Runs    []string      `json:"runs"`
	Memo    []string      `json:"memo"`
	Skipped []skippedJSON `json:"skipped"`
}

type skippedJSON struct {
	Run  string `json:"run,omitempty"`
	Memo string `json:"memo,omitempty"`
	Why  string `json:"why"`
}

func pruneRuns(ctx context.Context, g *globals, cutoff time.Time, memo, dryRun, asJSON bool) error {
	dir, err := locateStore(g.store)
	if err != nil {
		return err
	}
	out := pruneJSON{DryRun: dryRun, Before: cutoff.UTC().Format(time.RFC3339), Runs: []string{}, Memo: []string{}, Skipped: []skippedJSON{}}
	say := func(format string, args ...any) {
		if !asJSON {
			g.ui.printSafe(format, args...)
		}
	}
	verb := "removed"
	if dryRun {
		verb = "would remove"
	}
	err = g.withStore(dryRun, func(st cas.Store) error {
		runs, err := scheduler.ListRuns(ctx, st)
		if err != nil {
			return err
		}
		for i := range runs {
			r := &runs[i]
			skip := ""
			switch {
			case r.Err != nil:
				skip = "its record cannot be read"
			case r.Status == scheduler.StatusRunning:
				skip = "recorded running"
			case r.UpdatedAt().IsZero():
				skip = "its record gives no time"
			case !r.UpdatedAt().Before(cutoff):
				continue
			}
			if skip == "" && runActive(dir, r.Run) {
				skip = "a process is executing it"
			}
			if skip == "" && !dryRun {
				unlock, err := lockRun(dir, r.Run)
				if err != nil {
					skip = "a process is executing it"
				} else {
					_, err = scheduler.RemoveRun(ctx, st, r.Run, scheduler.RemoveOptions{})
					unlock()
					switch {
					case errors.Is(err, scheduler.ErrActive):
						skip = "recorded running"
					case err != nil:
						return err
					}
				}
			}
			if skip != "" {
				out.Skipped = append(out.Skipped, skippedJSON{Run: r.Run, Why: skip})
				say("kept run %s: %s\n", r.Run, skip)
				continue
			}
			out.Runs = append(out.Runs, r.Run)
			say("%s run %s  %s  %s  last changed %s\n", verb, r.Run, r.WorkOrder, r.Status, r.UpdatedAt().UTC().Format(time.RFC3339))
		}
		if !memo {
			return nil
		}
		entries, err := scheduler.MemoEntries(ctx, st)
		if err != nil {
			return err
		}
		var keys []string
		for i := range entries {
			m := &entries[i]
			switch {
			case m.Err != nil:
				out.Skipped = append(out.Skipped, skippedJSON{Memo: m.Key, Why: "its acceptance cannot be read"})
				say("kept memo entry %s: its acceptance cannot be read\n", m.Key)
			case m.AcceptedAt().IsZero():
				out.Skipped = append(out.Skipped, skippedJSON{Memo: m.Key, Why: "its acceptance gives no time"})
				say("kept memo entry %s: its acceptance gives no time\n", m.Key)
			case m.AcceptedAt().Before(cutoff):
				keys = append(keys, m.Key)
			}
		}
		out.Memo = append(out.Memo, keys...)
		if dryRun {
			return nil
		}
		return scheduler.RemoveMemo(ctx, st, keys...)
	})
	if err != nil {
		return err
	}
	if asJSON {
		return g.ui.printJSON(out)
	}
	summary := fmt.Sprintf("%s %d runs", verb, len(out.Runs))
	if memo {
		summary += fmt.Sprintf(" and %d memo entries", len(out.Memo))
	}
	summary += " last changed before " + out.Before
	if !dryRun {
		summary += "; 'hg gc' frees the blocks that no pin, run or memo entry reaches"
	}
	g.ui.printf("%s\n", summary)
	return nil
}

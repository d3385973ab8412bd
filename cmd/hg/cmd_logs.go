package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/internal/textsafe"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
	"github.com/spf13/cobra"
)

// logsFlags choose what hg logs prints.
type logsFlags struct {
	step           string
	attempt        int
	stdout, stderr bool
	raw, asJSON    bool
}

func newLogsCmd(g *globals) *cobra.Command {
	var f logsFlags
	cmd := &cobra.Command{
		Use:   "logs RUN NODE | RUN/NODE | RECEIPT [--step ID] [--attempt N] [--stdout|--stderr] [--raw|--json]",
		Short: "the stdout and stderr of a node's (or a receipt's) exec steps",
		Long: `Print what the exec steps of a node's receipt (or of any receipt, by CID or
pin) wrote to stdout and stderr, step by step in the order they ran, a
repaired step once for each attempt.

Each step starts with a line "== step ID, attempt N, transition T: exit
CODE" and each stream with "-- stdout: BYTES (CID)"; the output's own lines
follow, indented by four spaces and escaped for the terminal (a control
character, an escape sequence or a bidi override is shown as \x1b, \u202e
and so on; tabs are kept), so nothing a step wrote can pass for a line of
hg's or act on the terminal. --raw writes the bytes as they are, with
nothing around them: choose one stream of one step with --step, --attempt
and --stdout or --stderr. --json gives every chosen log with its text
(bytes that are not UTF-8 replaced by U+FFFD; --raw has them).

Output past the capture limit (16 MiB a stream) was cut when the step ran:
its header says so. The logs are blocks named by the exit evidence: 'hg gc'
does not keep them (the evidence names them by CID, not by link), so a
log gc removed is reported, and the command exits 1.

For a node that ran more than once (hg resume --retry), RUN NODE is its
latest receipt; the earlier ones are named on stderr, for 'hg logs RECEIPT'.`,
		Args: rangeArgs(1, 2, "RUN NODE, RUN/NODE or a RECEIPT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.raw && f.asJSON {
				return usageError{errors.New("--raw and --json: choose one")}
			}
			if f.attempt < -1 {
				return usageError{fmt.Errorf("--attempt %d: want 0 or more", f.attempt)}
			}
			if f.stdout && f.stderr {
				f.stdout, f.stderr = false, false // both, as without either
			}
			target := args[0]
			if len(args) == 2 {
				if !isRunID(args[0]) || strings.Contains(args[0], "/") {
					return usageError{fmt.Errorf("%q is not a run id (run-NAME): with two arguments, want RUN NODE", args[0])}
				}
				target = args[0] + "/" + args[1]
			}
			return g.withStore(true, func(st cas.Store) error {
				ctx := cmd.Context()
				c, earlier, err := logsReceipt(ctx, st, target)
				if err != nil {
					return err
				}
				l, err := ledger.LoadLedger(ctx, st, c)
				if err != nil {
					return err
				}
				if err := writeLogs(ctx, g, st, l, f); err != nil {
					return err
				}
				if len(earlier) > 0 {
					var names []string
					for _, e := range earlier {
						names = append(names, "'hg logs "+e.String()+"'")
					}
					g.ui.hintf("this node ran %d times before this receipt: %s", len(earlier), strings.Join(names, ", "))
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&f.step, "step", "", "only the step `ID`")
	cmd.Flags().IntVar(&f.attempt, "attempt", -1, "only repair attempt `N` of a step (0 is the first run)")
	cmd.Flags().BoolVar(&f.stdout, "stdout", false, "only stdout")
	cmd.Flags().BoolVar(&f.stderr, "stderr", false, "only stderr")
	cmd.Flags().BoolVar(&f.raw, "raw", false, "write one log's bytes as they are, unescaped")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print a JSON array of the logs, with their text")
	return cmd
}

// logsReceipt resolves what hg logs was given to a receipt, and for a
// node of a run, the receipts of its earlier attempts.
func logsReceipt(ctx context.Context, st cas.Store, arg string) (cid.Cid, []cid.Cid, error) {
	if run, node, ok := strings.Cut(arg, "/"); ok && isRunID(arg) {
		rec, _, err := scheduler.LoadRecord(ctx, st, run)
		if err != nil {
			return cid.Undef, nil, err
		}
		for _, n := range rec.Nodes {
			if n.Name != node {
				continue
			}
			if n.Receipt == nil {
				return cid.Undef, nil, textErr("node %s of run %s has no receipt (it is %s): it ran no step", node, run, n.State)
			}
			var earlier []cid.Cid
			for _, e := range n.Earlier {
				earlier = append(earlier, e.Cid)
			}
			return n.Receipt.Cid, earlier, nil
		}
		return cid.Undef, nil, textErr("run %s has no node %q", run, node)
	}
	c, err := resolveRoot(ctx, st, arg)
	if err != nil {
		return cid.Undef, nil, err
	}
	typ, err := ledgerType(ctx, st, c)
	if err != nil {
		return cid.Undef, nil, err
	}
	if typ == scheduler.TypeRun {
		rec, err := scheduler.LoadRecordAt(ctx, st, c)
		if err != nil {
			return cid.Undef, nil, err
		}
		var names []string
		for _, n := range rec.Nodes {
			if n.Receipt != nil {
				names = append(names, n.Name)
			}
		}
		return cid.Undef, nil, usageError{textErr("%s is a run: name one of its nodes (hg logs %s NODE); with a receipt: %s", arg, rec.Run, strings.Join(names, ", "))}
	}
	return c, nil, nil
}

// textErr is an error whose arguments are escaped: they can be a
// ledger's or a person's text.
func textErr(format string, args ...any) error {
	return errors.New(textsafe.Sprintf(format, args...))
}

// logJSON is one stream of a step as hg logs --json prints it.
type logJSON struct {
	CID       string `json:"cid,omitempty"`
	Bytes     int    `json:"bytes"`
	Truncated bool   `json:"truncated"`
	Text      string `json:"text"`
	Error     string `json:"error,omitempty"`
}

type stepLogJSON struct {
	Transition int64    `json:"transition"`
	Step       string   `json:"step"`
	Attempt    int64    `json:"attempt"`
	Code       int64    `json:"code"`
	TimedOut   bool     `json:"timed_out"`
	Argv       []string `json:"argv"`
	Stdout     *logJSON `json:"stdout,omitempty"`
	Stderr     *logJSON `json:"stderr,omitempty"`
}

// writeLogs prints the chosen logs of a ledger.
func writeLogs(ctx context.Context, g *globals, st cas.Store, l *ledger.Ledger, f logsFlags) error {
	var steps []ledger.StepLog
	all := l.StepLogs()
	for _, s := range all {
		if (f.step == "" || s.Step == f.step) && (f.attempt < 0 || s.Attempt == int64(f.attempt)) {
			steps = append(steps, s)
		}
	}
	type stream struct {
		name string
		ref  func(*ledger.StepLog) ledger.LogRef
	}
	var streams []stream
	if !f.stderr {
		streams = append(streams, stream{"stdout", func(s *ledger.StepLog) ledger.LogRef { return s.Stdout }})
	}
	if !f.stdout {
		streams = append(streams, stream{"stderr", func(s *ledger.StepLog) ledger.LogRef { return s.Stderr }})
	}
	if len(steps) == 0 {
		if len(all) == 0 {
			return fmt.Errorf("receipt %s ran no exec step: it has no logs", l.ReceiptCID)
		}
		return textErr("receipt %s has no exec step %s: its steps are %s", l.ReceiptCID, describeChoice(f), stepList(all))
	}
	if f.raw {
		if len(steps) != 1 || len(streams) != 1 {
			return usageError{textErr("--raw writes one log and %d match: choose a step (%s) with --step and --attempt, and --stdout or --stderr", len(steps)*len(streams), stepList(steps))}
		}
		ref := streams[0].ref(&steps[0])
		if ref.Err != nil {
			return ref.Err
		}
		_, err := ledger.ReadLog(ctx, st, ref.CID, g.ui.stdout)
		return missingLog(err)
	}
	read := func(ref ledger.LogRef) ([]byte, error) {
		if ref.Err != nil {
			return nil, ref.Err
		}
		var buf bytes.Buffer
		_, err := ledger.ReadLog(ctx, st, ref.CID, &buf)
		return buf.Bytes(), missingLog(err)
	}
	failed := 0
	if f.asJSON {
		out := []stepLogJSON{}
		for i := range steps {
			s := &steps[i]
			sj := stepLogJSON{Transition: s.Seq, Step: s.Step, Attempt: s.Attempt, Code: s.Code, TimedOut: s.TimedOut, Argv: s.Argv}
			if sj.Argv == nil {
				sj.Argv = []string{}
			}
			for _, str := range streams {
				ref := str.ref(s)
				lj := &logJSON{Truncated: ref.Truncated}
				if ref.CID.Defined() {
					lj.CID = ref.CID.String()
				}
				data, err := read(ref)
				if err != nil {
					lj.Error = err.Error()
					failed++
				}
				lj.Bytes, lj.Text = len(data), string(data)
				if str.name == "stdout" {
					sj.Stdout = lj
				} else {
					sj.Stderr = lj
				}
			}
			out = append(out, sj)
		}
		if err := g.ui.printJSON(out); err != nil {
			return err
		}
		return logsUnread(failed, l.ReceiptCID)
	}
	for i := range steps {
		s := &steps[i]
		exit := fmt.Sprintf("exit %d", s.Code)
		if s.TimedOut {
			exit += ", timed out"
		}
		g.ui.printSafe("== step %s, attempt %d, transition %d: %s\n", s.Step, s.Attempt, s.Seq, exit)
		for _, str := range streams {
			ref := str.ref(s)
			data, err := read(ref)
			switch {
			case err != nil:
				failed++
				g.ui.printSafe("-- %s: cannot be read: %v\n", str.name, err)
				continue
			case len(data) == 0:
				g.ui.printSafe("-- %s: empty\n", str.name)
				continue
			}
			cut := ""
			if ref.Truncated {
				cut = ", cut at the capture limit"
			}
			g.ui.printSafe("-- %s: %d bytes%s (%s)\n", str.name, len(data), cut, ref.CID)
			text := strings.TrimSuffix(string(data), "\n")
			for _, ln := range strings.Split(text, "\n") {
				g.ui.printf("    %s\n", ledger.LogLine(ln))
			}
		}
	}
	return logsUnread(failed, l.ReceiptCID)
}

// missingLog explains a log the store does not hold.
func missingLog(err error) error {
	if errors.Is(err, cas.ErrNotFound) {
		return fmt.Errorf("%w: a step's output is kept only until 'hg gc' (its evidence names it by CID, not by link)", err)
	}
	return err
}

func logsUnread(n int, receipt cid.Cid) error {
	if n == 0 {
		return nil
	}
	unit := "logs"
	if n == 1 {
		unit = "log"
	}
	return fmt.Errorf("%d %s of receipt %s could not be read", n, unit, receipt)
}

// stepList names steps as "test (attempt 0), test (attempt 1)".
func stepList(steps []ledger.StepLog) string {
	var parts []string
	for _, s := range steps {
		parts = append(parts, fmt.Sprintf("%s (attempt %d)", s.Step, s.Attempt))
	}
	return strings.Join(parts, ", ")
}

func describeChoice(f logsFlags) string {
	var parts []string
	if f.step != "" {
		parts = append(parts, f.step)
	}
	if f.attempt >= 0 {
		parts = append(parts, fmt.Sprintf("attempt %d", f.attempt))
	}
	return strings.Join(parts, ", ")
}

// failedStepTail is what hg report RUN shows under the failed node named
// node of run, whose receipt is receipt: the last lines of the output of
// its last exec step that failed, escaped, each behind a bar
// (haygent.Tail), and where to read the rest.
func failedStepTail(ctx context.Context, st cas.Store, receipt cid.Cid, run, node string) ([]string, error) {
	l, err := ledger.LoadLedger(ctx, st, receipt)
	if err != nil {
		return nil, err
	}
	var last *ledger.StepLog
	steps := l.StepLogs()
	for i := range steps {
		if steps[i].Failed() {
			last = &steps[i]
		}
	}
	if last == nil {
		return nil, nil
	}
	t := l.Tails[last.Evidence]
	const indent = "                 " // under the node's state
	switch {
	case t == nil:
		return nil, nil
	case t.Err != nil:
		return []string{textsafe.Sprintf("%sstep %s: its %s cannot be read: %v", indent, last.Step, t.Stream, t.Err)}, nil
	case len(t.Lines) == 0:
		return []string{textsafe.Sprintf("%sstep %s: exit %d; stdout and stderr are empty", indent, last.Step, last.Code)}, nil
	}
	out := []string{textsafe.Sprintf("%sstep %s: exit %d; %s, last %d lines ('hg logs %s %s' has all):", indent, last.Step, last.Code, t.Stream, len(t.Lines), run, node)}
	for _, ln := range t.Lines {
		out = append(out, indent+"| "+ln) // escaped already
	}
	return out, nil
}

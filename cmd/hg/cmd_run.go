package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/report"
	"github.com/haygent/hg/internal/gcpolicy"
	"github.com/haygent/hg/internal/textsafe"
	"github.com/haygent/hg/scheduler"
	"github.com/haygent/hg/scheduler/natsengine"
	"github.com/ipfs/go-cid"
	"github.com/spf13/cobra"
)

// opener opens the store for one short transaction at a time, so that
// other hg commands can use it while a run is in progress; it waits for
// them as long as they hold it.
type opener struct{ g *globals }

func (o opener) Open(ctx context.Context, readOnly bool) (cas.Store, error) {
	return o.g.openStoreWaiting(ctx, readOnly, commandLine(o.g.args))
}

func newRunCmd(g *globals) *cobra.Command {
	var (
		jobs                    int
		noCache, dryRun, asJSON bool
		adapterSpec, model      string
		runID, answers, out     string
		remote                  remoteFlags
	)
	cmd := &cobra.Command{
		Use:   "run WORKORDER.json [-j N] [--no-cache] [--dry-run] [--answers FILE] [--out DIR] [--json]",
		Short: "run a Work Order: a DAG of Haygents that advances only on accepted receipts",
		Long: `Validate the Work Order (unknown Haygents, unknown needs, cycles, pointers
into fields an upstream output contract lacks) and run it: each node is
invoked once its needs are done, with its input built from their accepted
receipts; each receipt is verified by the scheduler before the node counts as
done; a HALT blocks what is downstream of it while independent branches go
on. Prints the run id first and the outcome last. Exit 0 when the outcome
holds, 3 when it does not (the blocking receipts named), 1 for an invalid
Work Order (nothing runs).

A Work Order with decision slots is clarified first: the belief log of its
task class binds what it can; the critical slots left are asked on the
terminal, or answered from --answers FILE (a JSON object of decision names
and values); otherwise hg lists the questions and exits 5, with nothing run.
Every answer in FILE is used or refused: a name no decision has, or a value
other than the one the belief log binds, is refused (exit 2) before
anything runs; the log changes only through 'hg belief retract' or 'hg
belief assert'. A run that reaches its outcome writes the answers it used
into the belief log (see 'hg belief'), so the next order of the class asks
none of them.

A node may name its workspace: a directory (stored as a tree when the run
starts), a stored tree ({"tree": CID} or {"pin": NAME}), or the final
workspace of a node it needs ({"from": NODE}). With --out DIR, the final
workspace of each node the outcome requires is written to DIR/NODE once
the run ends ('hg get RUN/NODE -o DIR' writes any node's).`,
		Args: exactArgs(1, "one WORKORDER.json"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkJobs(jobs); err != nil {
				return err
			}
			if runID != "" {
				if err := scheduler.CheckRunID(runID); err != nil {
					return usageError{fmt.Errorf("--run-id: %w", err)}
				}
			}
			plan, err := scheduler.Load(args[0])
			if err != nil {
				return err
			}
			if dryRun {
				for i, wave := range plan.WorkOrder.Waves() {
					g.ui.printSafe("wave %d: %s\n", i+1, strings.Join(wave, " "))
				}
				return nil
			}
			if out != "" {
				if err := checkOutDirs(g, out, plan.WorkOrder.Required()); err != nil {
					return err
				}
			}
			if err := clarify(cmd.Context(), g, plan, answers, asJSON); err != nil {
				return err
			}
			return runPlan(cmd.Context(), g, plan, runID, false, false, jobs, noCache, asJSON, adapterSpec, model, &remote, out)
		},
	}
	cmd.Flags().IntVarP(&jobs, "jobs", "j", 2, "run at most `N` nodes at once")
	cmd.Flags().StringVar(&runID, "run-id", "", "name the run `run-NAME` instead of a generated id")
	cmd.Flags().BoolVar(&noCache, "no-cache", false, "run every node, even when an accepted receipt for the same work exists")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "validate and print the plan in waves; run nothing")
	cmd.Flags().StringVar(&answers, "answers", "", "answer the Work Order's decisions the belief log does not bind from `FILE`, a JSON object")
	cmd.Flags().BoolVar(&asJSON, "json", false, "stream node events and the outcome as JSON lines")
	cmd.Flags().StringVar(&adapterSpec, "adapter", "", "who answers slots: script:FILE, exec:CMD or openai")
	cmd.Flags().StringVar(&model, "model", "", "the model, for --adapter openai")
	cmd.Flags().StringVar(&out, "out", "", "write the final workspace of each node the outcome requires to `DIR`/NODE")
	remote.register(cmd)
	return cmd
}

func newResumeCmd(g *globals) *cobra.Command {
	var (
		jobs                   int
		noCache, asJSON, retry bool
		adapterSpec, model     string
		remote                 remoteFlags
	)
	cmd := &cobra.Command{
		Use:   "resume RUN [--retry]",
		Short: "finish a run that stopped; accepted nodes never run again",
		Long: `Finish a run that stopped (killed, cancelled, or halted): nodes whose
acceptance was committed never run again; nodes that were running run again.
With --retry, failed nodes (a HALT, a rejected receipt, an engine error, a
regression found by 'hg recheck') and the nodes they blocked run again too;
each failed attempt's receipt stays in the record (hg status shows the
attempts). A node is started at most max_attempts times in all (the Work
Order's, else its package manifest's, else 3): past that its circuit
breaker opens and it stays blocked until 'hg breaker reset RUN NODE --why
TEXT'. Deleted and rewritten nodes never run again.`,
		Args: exactArgs(1, "one RUN id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkJobs(jobs); err != nil {
				return err
			}
			st, err := g.openStore(true, commandLine(g.args))
			if err != nil {
				return err
			}
			plan, _, cleanup, err := scheduler.PlanFromStore(cmd.Context(), st, args[0])
			st.Close()
			if err != nil {
				return err
			}
			defer cleanup()
			return runPlan(cmd.Context(), g, plan, args[0], true, retry, jobs, noCache, asJSON, adapterSpec, model, &remote, "")
		},
	}
	cmd.Flags().IntVarP(&jobs, "jobs", "j", 2, "run at most `N` nodes at once")
	cmd.Flags().BoolVar(&noCache, "no-cache", false, "bypass the memo cache")
	cmd.Flags().BoolVar(&retry, "retry", false, "run failed nodes again, and the nodes they blocked")
	cmd.Flags().BoolVar(&asJSON, "json", false, "stream node events and the outcome as JSON lines")
	cmd.Flags().StringVar(&adapterSpec, "adapter", "", "who answers slots: script:FILE, exec:CMD or openai")
	cmd.Flags().StringVar(&model, "model", "", "the model, for --adapter openai")
	remote.register(cmd)
	return cmd
}

func runPlan(ctx context.Context, g *globals, plan *scheduler.Plan, run string, resume, retry bool, jobs int, noCache, asJSON bool, adapterSpec, model string, remote *remoteFlags, out string) error {
	defer gcpolicy.Apply()()
	adapter, err := newAdapter(adapterSpec, model)
	if err != nil {
		return err
	}
	dir, err := locateStore(g.store)
	if err != nil {
		return err
	}
	key, err := runnerKey(g, dir)
	if err != nil {
		return err
	}
	opts := scheduler.Options{Store: opener{g}, Key: key, Jobs: jobs, NoCache: noCache, Adapter: adapter, Retry: retry, StoreDir: dir}
	// --json streams every event (a node's finished work twice: the
	// second, committed, once it is stored); otherwise progress
	// (runprogress.go) shows them on stderr, and what the NATS engine
	// notices (the server lost and regained, no worker, a worker gone
	// silent) on lines of their own.
	var (
		progress   *runProgress
		progressMu sync.Mutex
	)
	notify := func(n natsengine.Notice) {
		if asJSON {
			_ = g.ui.printJSON(map[string]any{"event": "nats", "kind": n.Kind, "node": n.Node, "worker": n.Worker, "message": n.Text})
			return
		}
		progressMu.Lock()
		p := progress
		progressMu.Unlock()
		if p != nil {
			p.note(n.Text)
		} else {
			fmt.Fprintf(g.ui.stderr, "hg: %s\n", oneLine(n.Text))
		}
	}
	// The store's trusted keys, --trust's and --nats (cmd_worker.go):
	// whose receipts count, and remote workers.
	closeRemote, err := remote.apply(&opts, dir, notify)
	if err != nil {
		return err
	}
	defer closeRemote()
	opts.Events = func(ev scheduler.Event) {
		switch {
		case asJSON:
			_ = g.ui.printJSON(ev)
		case progress != nil:
			progress.event(ev)
		}
	}
	s := scheduler.New(opts)
	if !resume {
		if run, err = s.Start(ctx, plan, run); err != nil {
			return err
		}
	}
	unlock, err := lockRun(dir, run)
	if err != nil {
		return err
	}
	defer unlock()
	if asJSON {
		_ = g.ui.printJSON(map[string]any{"run": run, "event": "started"})
	} else {
		g.ui.printSafe("run %s\n", run)
	}
	if !asJSON {
		p := newRunProgress(g.ui.stderr, g.ui.showProgress(), len(plan.WorkOrder.Order), resumedStates(ctx, g, run, resume))
		progressMu.Lock()
		progress = p
		progressMu.Unlock()
	}
	rec, err := s.Execute(ctx, plan, run)
	if progress != nil {
		progress.finish()
	}
	if err != nil {
		return err
	}
	blocking, breakers := []string{}, []string{}
	for _, n := range rec.Nodes {
		if n.State == dag.Failed && n.Receipt != nil {
			blocking = append(blocking, n.Name+" "+n.Receipt.String())
		}
		if n.Breaker {
			breakers = append(breakers, n.Name)
		}
	}
	if asJSON {
		out := map[string]any{"run": run, "event": "finished", "status": rec.Status, "reason": rec.Reason, "blocking": blocking}
		if len(breakers) > 0 {
			out["breaker_open"] = breakers
		}
		_ = g.ui.printJSON(out)
	} else {
		g.ui.printSafe("%s: %s\n", rec.Status, rec.Reason)
		for _, b := range blocking {
			g.ui.printSafe("  halted %s\n", b)
		}
		for _, b := range breakers {
			g.ui.printSafe("  breaker open %s: 'hg breaker reset %s %s --why TEXT' lets it run again\n", b, run, b)
		}
	}
	if out != "" {
		if err := writeOutcomeTrees(ctx, g, rec, plan.WorkOrder.Required(), out, asJSON); err != nil {
			return err
		}
	}
	switch rec.Status {
	case scheduler.StatusDone:
		return crystallize(ctx, g, run, asJSON)
	case scheduler.StatusCancelled:
		return fmt.Errorf("run %s cancelled", run)
	}
	return haltError{textsafe.Sprintf("run %s did not reach its outcome: %s", run, rec.Reason)}
}

func newCancelCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel RUN",
		Short: "stop a run: running steps are killed, finished receipts kept, the rest cancelled",
		Args:  exactArgs(1, "one RUN id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withStore(false, func(st cas.Store) error {
				rec, err := scheduler.Cancel(cmd.Context(), st, args[0], time.Now())
				if err != nil {
					return err
				}
				g.ui.printSafe("%s: %s\n", rec.Run, rec.Status)
				return nil
			})
		},
	}
}

func newStatusCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [RUN]",
		Short: "every node's state, attempts and receipt; with no RUN, every run (as hg runs)",
		Args:  rangeArgs(0, 1, "a RUN id, or none for every run"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return listRuns(cmd.Context(), g, runsFilter{}, asJSON)
			}
			return g.withStore(true, func(st cas.Store) error {
				rec, _, err := scheduler.LoadRecord(cmd.Context(), st, args[0])
				if err != nil {
					return err
				}
				// A record that says running while no process holds the
				// run's lock was left by a process that died.
				orphaned := false
				if dir, err := locateStore(g.store); err == nil && rec.Status == scheduler.StatusRunning {
					orphaned = !runActive(dir, rec.Run)
				}
				if asJSON {
					type nodeJSON struct {
						Name     string `json:"name"`
						State    string `json:"state"`
						Attempts int64  `json:"attempts"`
						Memo     bool   `json:"memo"`
						Receipt  string `json:"receipt,omitempty"`
						Reason   string `json:"reason,omitempty"`
						Breaker  bool   `json:"breaker_open,omitempty"`
					}
					var nodes []nodeJSON
					for _, n := range rec.Nodes {
						nj := nodeJSON{Name: n.Name, State: n.State, Attempts: n.Attempts, Memo: n.Memo, Reason: n.Reason, Breaker: n.Breaker}
						if n.Receipt != nil {
							nj.Receipt = n.Receipt.String()
						}
						nodes = append(nodes, nj)
					}
					out := map[string]any{"run": rec.Run, "status": rec.Status, "reason": rec.Reason, "nodes": nodes}
					if len(rec.Events) > 0 {
						out["events"] = eventsJSON(rec.Events)
					}
					if rec.Status == scheduler.StatusRunning {
						out["executing"] = !orphaned
					}
					return g.ui.printJSON(out)
				}
				// Every field can be the record's text: printed escaped.
				g.ui.printSafe("run %s  %s  %s\n", rec.Run, rec.Name, rec.Status)
				if rec.Reason != "" {
					g.ui.printSafe("  %s\n", rec.Reason)
				}
				if orphaned {
					g.ui.printSafe("  no process is executing it (the one that was died): 'hg resume %s' goes on\n", rec.Run)
				}
				tw := tabwriter.NewWriter(g.ui.stdout, 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NODE\tSTATE\tATTEMPTS\tRECEIPT\tNOTE")
				for _, n := range rec.Nodes {
					receipt := "-"
					if n.Receipt != nil {
						receipt = n.Receipt.String()
					}
					note := n.Reason
					switch {
					case n.Memo && note == "":
						note = "cached"
					case n.Memo:
						note += " (cached)"
					}
					textsafe.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", n.Name, n.State, n.Attempts, receipt, note)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				writeEvents(g, rec.Events)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}

func newDagDotCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "dot WORKORDER.json|RUN",
		Short: "print a Work Order or a run as Graphviz, nodes coloured by state",
		Long: `Print a Work Order file, or the Work Order of a run in the store coloured by
the state of each node, as Graphviz (dot -Tsvg).

The argument is read as a Work Order file if it names a file that exists or
ends in .json (a missing one is an error, never taken for a run), and as a
run id (run-NAME) otherwise; a directory never hides a run of its name.`,
		Args: exactArgs(1, "a WORKORDER.json or a RUN id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			isFile, err := dotArgIsFile(args[0])
			if err != nil {
				return err
			}
			if isFile {
				plan, err := scheduler.Load(args[0])
				if err != nil {
					return err
				}
				g.ui.printf("%s", plan.WorkOrder.Dot(nil))
				return nil
			}
			return g.withStore(true, func(st cas.Store) error {
				rec, _, err := scheduler.LoadRecord(cmd.Context(), st, args[0])
				if err != nil {
					return err
				}
				_, wo, err := scheduler.LoadWorkOrder(cmd.Context(), st, rec)
				if err != nil {
					return err
				}
				states := map[string]string{}
				for _, n := range rec.Nodes {
					states[n.Name] = n.State
				}
				g.ui.printf("%s", wo.Dot(states))
				return nil
			})
		},
	}
}

// dotArgIsFile decides whether the argument of 'hg dag dot' is a Work
// Order file rather than a run id, from its form first: a path that
// exists and is not a directory, or that ends in .json, is a file even
// when it is missing (so a mistyped path is reported as a missing file,
// not as an unknown run or a missing store); a valid run id is a run
// unless a file of that name exists. Anything else is neither.
func dotArgIsFile(arg string) (bool, error) {
	info, statErr := os.Stat(arg)
	switch {
	case statErr == nil && !info.IsDir():
		return true, nil
	case strings.HasSuffix(strings.ToLower(arg), ".json"):
		return true, nil
	case scheduler.CheckRunID(arg) == nil:
		return false, nil
	case statErr == nil: // a directory
		return false, fmt.Errorf("%s is a directory: want a Work Order file or a run id (run-NAME)", arg)
	case errors.Is(statErr, fs.ErrNotExist):
		return false, usageError{fmt.Errorf("%s: no such Work Order file, and not a run id (run-NAME)", arg)}
	}
	return false, statErr
}

// runReport renders the run-level report: the record and each node's
// receipt, from the ledger.
func runReport(ctx context.Context, g *globals, st cas.Store, run string) error {
	rec, _, err := scheduler.LoadRecord(ctx, st, run)
	if err != nil {
		return err
	}
	// Every field is the record's text, or a receipt's: printed escaped,
	// one field per line at most.
	g.ui.printSafe("run        %s\n", rec.Run)
	g.ui.printSafe("workorder  %s  (%s)\n", rec.Name, rec.WorkOrder)
	g.ui.printSafe("objective  %s\n", rec.Objective)
	g.ui.printSafe("status     %s: %s\n", rec.Status, rec.Reason)
	g.ui.printSafe("started    %s, updated %s\n", rec.Started, rec.Updated)
	if len(rec.Decisions) > 0 {
		asked := 0
		for _, d := range rec.Decisions {
			if d.Asked {
				asked++
			}
		}
		g.ui.printSafe("decisions  %d of class %s, %d asked\n", len(rec.Decisions), rec.Class, asked)
		for _, d := range rec.Decisions {
			event := ""
			if d.Event != nil {
				event = "  event " + d.Event.String()
			}
			if !d.Asked {
				g.ui.printSafe("  %s%s\n", describeDecision(d.Slot, d.Source != "", d.Value, d.Source), event)
				continue
			}
			g.ui.printSafe("  %s\n", describeDecision(d.Slot, d.Source != "", d.Value, d.Source))
			g.ui.printSafe("  %s   asked: %s%s\n", strings.Repeat(" ", len(d.Slot)), d.Question, event)
		}
	}
	g.ui.printf("\n")
	for _, n := range rec.Nodes {
		line := textsafe.Sprintf("  %-14s %-10s", n.Name, n.State)
		var more []string // lines below the node's
		if n.Receipt != nil {
			r, err := ledger.LoadReceipt(ctx, st, n.Receipt.Cid)
			if err != nil {
				return err
			}
			rejected, err := rejectedReceipt(ctx, st, n)
			if err != nil {
				return err
			}
			// The receipt's status, never without the scheduler's verdict
			// when that was not "accepted", nor without its limitations.
			status := textsafe.Escape(r.Status)
			if rejected != "" {
				status += " (" + rejected + ")"
			}
			if note := report.LimitationsNote(r); note != "" {
				status += "  " + note
			}
			line += textsafe.Sprintf(" %s %s  receipt %s", r.Haygent, status, n.Receipt)
			if rejected != "" && n.Reason != "" {
				more = append(more, textsafe.Sprintf("  %14s %s", "", n.Reason))
			}
			if r.Halt != nil {
				more = append(more, textsafe.Sprintf("  %14s %s %s: %s", "", r.Halt.FailedGate, r.Halt.Verdict, r.Halt.Reason))
			}
			if f := r.FinalWorkspace; f != nil && f.Cid != haygent.EmptyTree() {
				more = append(more, textsafe.Sprintf("  %14s final workspace %s  (hg get %s/%s -o DIR)", "", f.Cid, rec.Run, n.Name))
			}
			if n.State == dag.Failed {
				tail, err := failedStepTail(ctx, st, n.Receipt.Cid, rec.Run, n.Name)
				if err != nil {
					return err
				}
				more = append(more, tail...)
			}
		}
		if n.Memo {
			line += "  (reused from the memo cache)"
		}
		if n.State == dag.Blocked && n.BlockedBy != nil {
			line += "  blocked by " + n.BlockedBy.String()
		}
		// A move outside the scheduler's own (a regression, a deletion, a
		// rewrite, an open breaker) says why, under the node.
		if n.Breaker || n.State == dag.Deleted || n.State == dag.Rewritten || strings.HasPrefix(n.Reason, "regressed: ") {
			more = append(more, textsafe.Sprintf("  %14s %s", "", n.Reason))
		}
		g.ui.printf("%s\n", line)
		for _, m := range more {
			g.ui.printf("%s\n", m)
		}
	}
	writeEvents(g, rec.Events)
	return nil
}

// writeEvents prints a run's events, oldest first, under a blank line:
// every move outside the scheduler's own, with who made it and why. Each
// field can be a person's text or the ledger's: printed escaped.
func writeEvents(g *globals, events []scheduler.RunEvent) {
	if len(events) == 0 {
		return
	}
	g.ui.printf("\nevents\n")
	for _, ev := range events {
		what := ev.Kind
		switch ev.Kind {
		case scheduler.EventRegressed:
			what += " (" + ev.Check + ")"
		case scheduler.EventRewritten:
			what += " by " + ev.ByNode
		}
		who := ev.Who
		if ev.Key != "" {
			who += " (" + ev.Key + ")"
		}
		g.ui.printSafe("  %s  %s  %s: %s -> %s, %d attempts, by %s\n", ev.At, ev.Node, what, ev.From, ev.To, ev.Attempts, who)
		g.ui.printSafe("  %s  %s\n", strings.Repeat(" ", len(ev.At)), ev.Reason)
	}
}

// eventJSON is a run's event as hg status --json prints it.
type eventJSON struct {
	Kind     string `json:"kind"`
	Node     string `json:"node"`
	From     string `json:"from"`
	To       string `json:"to"`
	Receipt  string `json:"receipt,omitempty"`
	By       string `json:"by,omitempty"`
	ByNode   string `json:"by_node,omitempty"`
	Check    string `json:"check,omitempty"`
	Reason   string `json:"reason"`
	Attempts int64  `json:"attempts"`
	Who      string `json:"who"`
	Key      string `json:"key,omitempty"`
	At       string `json:"at"`
}

func eventsJSON(events []scheduler.RunEvent) []eventJSON {
	out := make([]eventJSON, len(events))
	for i, ev := range events {
		e := eventJSON{Kind: ev.Kind, Node: ev.Node, From: ev.From, To: ev.To, ByNode: ev.ByNode, Check: ev.Check,
			Reason: ev.Reason, Attempts: ev.Attempts, Who: ev.Who, Key: ev.Key, At: ev.At}
		if ev.Receipt != nil {
			e.Receipt = ev.Receipt.String()
		}
		if ev.By != nil {
			e.By = ev.By.String()
		}
		out[i] = e
	}
	return out
}

// rejectedReceipt says how the scheduler judged a node's receipt when it
// did not accept it: "receipt rejected by the scheduler" for an
// acceptance whose verdict is not "accepted", "receipt never accepted"
// when the node records no acceptance of it; "" for an accepted receipt.
func rejectedReceipt(ctx context.Context, st cas.Store, n scheduler.NodeRecord) (string, error) {
	if n.Acceptance == nil {
		return "receipt never accepted", nil
	}
	var acc scheduler.Acceptance
	if err := st.View(ctx, n.Acceptance.Cid, func(d []byte) error { return cas.Unmarshal(d, &acc) }); err != nil {
		return "", fmt.Errorf("node %s: acceptance %s: %w", n.Name, n.Acceptance.Cid, err)
	}
	if acc.Type != scheduler.TypeAcceptance {
		return "", fmt.Errorf("node %s: %s is a %q, not an acceptance: %w", n.Name, n.Acceptance.Cid, acc.Type, cas.ErrInvalid)
	}
	switch {
	case acc.Receipt.Cid != n.Receipt.Cid:
		return "receipt never accepted: the node's acceptance is of " + acc.Receipt.Cid.String(), nil
	case acc.Verdict != scheduler.Accepted:
		return "receipt rejected by the scheduler", nil
	}
	return "", nil
}

// isRunID reports whether s names a run rather than a CID.
func isRunID(s string) bool {
	_, err := cid.Decode(s)
	return err != nil && strings.HasPrefix(s, "run-")
}

package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/replay"
	"github.com/haygent/hg/haygent/verify"
	"github.com/haygent/hg/internal/textsafe"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
	"github.com/spf13/cobra"
)

func newRecheckCmd(g *globals) *cobra.Command {
	var (
		opts   replay.Options
		replay bool
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "recheck RUN|RECEIPT [--replay] [--json]",
		Short: "measure a run's done work again, under today's trust; what no longer holds regresses",
		Long: `Verify every done node of RUN again (a run id, RUN/NODE for one node, the
CID of its record, or a receipt of one of its nodes), against the keys the
store trusts today (its runner key and 'hg key trust'; 'hg key untrust'
withdraws one), and with --replay also replay each node that still holds
(as 'hg replay' does). A done node that no longer holds regresses: the run
records a regression event (who, when, the check that failed and why; no
receipt is ever changed), the node moves back to failed, what depends on it
is blocked, a done run becomes halted, and the memo cache forgets the work.
'hg status', 'hg report' and 'hg verify' show it; 'hg resume --retry RUN'
runs it again. Every re-measurement of a run is recorded, whatever it
found: each done node measured, whether it held, regressed or fell below a
regression, and how its replay compared (an hg/recheck@1 under the ref
rechecks/RUN), which 'hg metrics' counts. A receipt of no run is measured
and nothing is recorded.

Exit 0 when every done node holds, 4 when one regressed (nothing else is
an integrity finding: a run already regressed is not re-measured there).`,
		Args: exactArgs(1, "one RUN or RECEIPT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return recheck(cmd.Context(), g, args[0], replay, opts, asJSON)
		},
	}
	cmd.Flags().BoolVar(&replay, "replay", false, "replay each node that still holds, and regress the ones whose replay diverges")
	cmd.Flags().BoolVar(&opts.AllowUnisolated, "allow-unisolated", false, "with --replay, run exec steps with less than their whole confinement where the kernel cannot give it")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the re-measurement as JSON")
	return cmd
}

// recheckTarget is what recheck's argument names.
type recheckTarget struct {
	run     string  // the run; "" for a receipt of no run
	record  cid.Cid // the record to measure (the run's latest)
	only    string  // one node, or every node
	receipt cid.Cid // a receipt of no run
}

// findRecheckTarget resolves recheck's argument: a run id, RUN/NODE, a
// record's CID or pin, or a receipt's (which names its run and node).
func findRecheckTarget(ctx context.Context, st cas.Store, arg string) (recheckTarget, error) {
	var t recheckTarget
	if isRunID(arg) {
		run, node, _ := strings.Cut(arg, "/")
		c, err := st.GetRef(ctx, scheduler.RefNamespace, run)
		if err != nil {
			return t, fmt.Errorf("run %s: %w", run, err)
		}
		return recheckTarget{run: run, record: c, only: node}, nil
	}
	c, err := resolve(ctx, st, arg)
	if err != nil {
		return t, err
	}
	typ, err := ledgerType(ctx, st, c)
	if err != nil {
		return t, err
	}
	if typ == scheduler.TypeRun {
		rec, err := scheduler.LoadRecordAt(ctx, st, c)
		if err != nil {
			return t, fmt.Errorf("run record %s: %w", c, err)
		}
		switch latest, err := st.GetRef(ctx, scheduler.RefNamespace, rec.Run); {
		case errors.Is(err, cas.ErrNotFound): // imported from a bundle: this record becomes the run's
		case err != nil:
			return t, err
		case latest != c:
			return t, fmt.Errorf("%s is not the latest record of run %s (%s is): 'hg recheck %s' measures the run as it stands", c, rec.Run, latest, rec.Run)
		}
		return recheckTarget{run: rec.Run, record: c}, nil
	}
	r, err := ledger.LoadReceipt(ctx, st, c)
	if err != nil {
		return t, err
	}
	run, node, ok := strings.Cut(r.Run, "/")
	if !ok || scheduler.CheckRunID(run) != nil {
		return recheckTarget{receipt: c}, nil
	}
	rec, at, err := scheduler.LoadRecord(ctx, st, run)
	if errors.Is(err, cas.ErrNotFound) {
		return recheckTarget{receipt: c}, nil
	}
	if err != nil {
		return t, err
	}
	for _, n := range rec.Nodes {
		if n.Name == node {
			if n.Receipt == nil || n.Receipt.Cid != c {
				return t, fmt.Errorf("receipt %s is not the receipt node %s of run %s holds now (it is %s): an earlier attempt is not re-measured", c, node, run, n.State)
			}
			return recheckTarget{run: run, record: at, only: node}, nil
		}
	}
	return t, fmt.Errorf("run %s has no node %q, which receipt %s names", run, node, c)
}

// recheckNode is one node's re-measurement, for --json.
type recheckNode struct {
	Node    string `json:"node"`
	State   string `json:"state"` // before the re-measurement
	Receipt string `json:"receipt,omitempty"`
	// Result: "holds", "regressed", "blocked" (below a regression), or
	// "not measured" (not done, or another node was asked for).
	Result string `json:"result"`
	Check  string `json:"check,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Replay: "agree" counts, when the node was replayed.
	Replay *recheckReplay `json:"replay,omitempty"`
}

type recheckReplay struct {
	Agree       int    `json:"agree"`
	Transitions int    `json:"transitions"`
	Divergence  string `json:"divergence,omitempty"`
}

type recheckReport struct {
	Run         string        `json:"run"`
	Measured    string        `json:"measured"` // the record measured
	Record      string        `json:"record"`   // the record now
	Trusted     int           `json:"trusted"`
	Replay      bool          `json:"replay"`
	Nodes       []recheckNode `json:"nodes"`
	Regressed   []string      `json:"regressed"`
	Blocked     []string      `json:"blocked"`
	MemoDropped int           `json:"memo_dropped"`
	Status      string        `json:"status"`
	Reason      string        `json:"reason"`
	OK          bool          `json:"ok"`
	// Logged is the hg/recheck@1 that records this re-measurement
	// (ref rechecks/RUN); "" when no done node was measured.
	Logged string `json:"logged,omitempty"`
}

func recheck(ctx context.Context, g *globals, arg string, replay bool, opts replay.Options, asJSON bool) error {
	dir, err := locateStore(g.store)
	if err != nil {
		return err
	}
	trusted, err := storeTrust(dir)
	if err != nil {
		return err
	}
	var t recheckTarget
	if err := g.withStore(true, func(st cas.Store) error {
		var err error
		t, err = findRecheckTarget(ctx, st, arg)
		return err
	}); err != nil {
		return err
	}
	if t.run == "" {
		return recheckReceipt(ctx, g, t.receipt, trusted, replay, opts, asJSON)
	}
	// No process may execute the run while it is measured and moved.
	unlock, err := lockRun(dir, t.run)
	if err != nil {
		return err
	}
	defer unlock()
	var (
		v        *scheduler.RunVerification
		wo       *dag.WorkOrder
		findings []scheduler.Finding
	)
	if err := g.withStore(true, func(st cas.Store) error {
		var err error
		v, wo, findings, err = scheduler.Remeasure(ctx, st, t.record, trusted, t.only)
		return err
	}); err != nil {
		if errors.Is(err, cas.ErrInvalid) {
			return integrityError{msg: textsafe.Sprintf("recheck of run %s: %v", t.run, err)}
		}
		return err
	}
	report := recheckReport{Run: t.run, Measured: t.record.String(), Record: t.record.String(), Trusted: len(trusted), Replay: replay,
		Regressed: []string{}, Blocked: []string{}}
	byNode := map[string]*scheduler.NodeVerification{}
	for i := range v.Nodes {
		byNode[v.Nodes[i].Node] = &v.Nodes[i]
	}
	found := map[string]*scheduler.Finding{}
	for i := range findings {
		found[findings[i].Node] = &findings[i]
	}
	replays := map[string]*recheckReplay{}
	// Topological order: a node below one that regressed is not replayed,
	// it is blocked.
	falls := map[string]bool{}
	for _, wave := range wo.Waves() {
		for _, name := range wave {
			for _, up := range wo.Upstream(name) {
				falls[name] = falls[name] || falls[up]
			}
			if found[name] != nil {
				falls[name] = true
			}
			n := byNode[name]
			if !replay || falls[name] || n == nil || n.State != dag.Done || (t.only != "" && name != t.only) {
				continue
			}
			res, err := replayOne(ctx, g, n.Receipt, opts)
			var integ integrityError
			switch {
			case errors.As(err, &integ):
				findings = append(findings, scheduler.Finding{Node: name, Receipt: n.Receipt, Check: scheduler.CheckReplay, Detail: integ.msg})
			case err != nil:
				return fmt.Errorf("node %s: replay: %w", textsafe.Escape(name), err)
			default:
				rr := &recheckReplay{Agree: res.Agree, Transitions: res.Total()}
				if d := res.Divergence; d != nil {
					rr.Divergence = d.String()
					findings = append(findings, scheduler.Finding{Node: name, Receipt: n.Receipt, Check: scheduler.CheckReplay,
						Detail: fmt.Sprintf("%d/%d transitions agree; first divergence: %s", res.Agree, res.Total(), d)})
				}
				replays[name] = rr
			}
			if k := len(findings); k > 0 && findings[k-1].Node == name {
				found[name] = &findings[k-1]
				falls[name] = true
			}
		}
	}
	status, reason := v.Status, ""
	if len(findings) > 0 {
		var res *scheduler.RegressResult
		if err := g.withStore(false, func(st cas.Store) error {
			var err error
			res, err = scheduler.Regress(ctx, st, t.record, findings, actorOf(dir), stamp())
			return err
		}); err != nil {
			return err
		}
		report.Record, report.Regressed, report.Blocked, report.MemoDropped = res.Root.String(), res.Regressed, res.Blocked, res.MemoDropped
		status, reason = res.Record.Status, res.Record.Reason
	} else if err := g.withStore(true, func(st cas.Store) error {
		rec, err := scheduler.LoadRecordAt(ctx, st, t.record)
		if err == nil {
			reason = rec.Reason
		}
		return err
	}); err != nil {
		return err
	}
	report.Status, report.Reason, report.OK = status, reason, len(findings) == 0
	var entries []scheduler.RecheckEntry
	for name, rn := range byNode {
		if rn.State != dag.Done || (t.only != "" && name != t.only) || !rn.Receipt.Defined() {
			continue
		}
		e := scheduler.RecheckEntry{Node: name, Receipt: cas.Link{Cid: rn.Receipt}, Result: scheduler.RecheckHolds}
		if f := found[name]; f != nil {
			e.Result, e.Check = scheduler.RecheckRegressed, f.Check
			if f.Check == scheduler.CheckReplay {
				e.Replay = &scheduler.RecheckReplay{Diverged: true}
			}
		} else if falls[name] {
			e.Result = scheduler.RecheckBlocked
		}
		if rr := replays[name]; rr != nil {
			e.Replay = &scheduler.RecheckReplay{Agree: int64(rr.Agree), Transitions: int64(rr.Transitions), Diverged: rr.Divergence != ""}
		}
		entries = append(entries, e)
	}
	if len(entries) > 0 {
		sort.Slice(entries, func(i, j int) bool { return entries[i].Node < entries[j].Node })
		var keys []string
		for _, k := range trusted {
			keys = append(keys, ledger.FormatPublicKey(k))
		}
		sort.Strings(keys)
		a := actorOf(dir)
		if err := g.withStore(false, func(st cas.Store) error {
			// A record imported from a bundle that nothing regressed is
			// no run of this store: no log that 'hg run rm' could not
			// remove.
			if _, err := st.GetRef(ctx, scheduler.RefNamespace, t.run); errors.Is(err, cas.ErrNotFound) {
				return nil
			} else if err != nil {
				return err
			}
			c, err := scheduler.RecordRecheck(ctx, st, scheduler.Recheck{Run: t.run, Record: cas.Link{Cid: t.record}, At: stamp(),
				Who: a.Who, Key: a.Key, Trusted: keys, Replay: replay, Nodes: entries})
			report.Logged = c.String()
			return err
		}); err != nil {
			return fmt.Errorf("record the recheck of run %s: %w", t.run, err)
		}
	}
	blocked := map[string]bool{}
	for _, b := range report.Blocked {
		blocked[b] = true
	}
	var order []string // topological
	for _, wave := range wo.Waves() {
		order = append(order, wave...)
	}
	for _, name := range order {
		n := byNode[name]
		if n == nil {
			continue
		}
		rn := recheckNode{Node: name, State: n.State, Replay: replays[name]}
		if n.Receipt.Defined() {
			rn.Receipt = n.Receipt.String()
		}
		switch f := found[name]; {
		case f != nil:
			rn.Result, rn.Check, rn.Detail = "regressed", f.Check, f.Detail
		case blocked[name]:
			rn.Result = "blocked"
		case n.State != dag.Done || (t.only != "" && name != t.only):
			rn.Result = "not measured"
		default:
			rn.Result = "holds"
		}
		report.Nodes = append(report.Nodes, rn)
	}
	if asJSON {
		if err := g.ui.printJSON(report); err != nil {
			return err
		}
	} else {
		writeRecheck(g, &report)
	}
	if len(findings) > 0 {
		var names []string
		for _, f := range findings {
			names = append(names, f.Node+" ("+f.Check+")")
		}
		verb := "no longer hold"
		if len(findings) == 1 {
			verb = "no longer holds"
		}
		return integrityError{msg: textsafe.Sprintf("re-measurement of run %s: %s %s: %s", t.run, count(len(findings), "node"), verb, strings.Join(names, ", "))}
	}
	return nil
}

// writeRecheck prints a re-measurement as a table. Names, details and
// reasons can quote the ledger: printed escaped.
func writeRecheck(g *globals, r *recheckReport) {
	with := ""
	if r.Replay {
		with = ", with replay"
	}
	g.ui.printSafe("recheck run %s under %s%s\n", r.Run, count(r.Trusted, "trusted key"), with)
	for _, n := range r.Nodes {
		line := textsafe.Sprintf("  node %-14s %-10s %s", n.Node, n.State, n.Result)
		switch {
		case n.Result == "regressed":
			line += textsafe.Sprintf("  %s: %s", n.Check, n.Detail)
		case n.Result == "blocked":
			line += "  below a regression"
		case n.Replay != nil:
			line += fmt.Sprintf("  replay %d/%d transitions agree", n.Replay.Agree, n.Replay.Transitions)
		}
		g.ui.printf("%s\n", line)
	}
	g.ui.printSafe("run %s: %s: %s\n", r.Run, r.Status, r.Reason)
	if len(r.Regressed) > 0 {
		g.ui.printSafe("regressed %s, blocked %d; record %s (was %s)\n", strings.Join(r.Regressed, ", "), len(r.Blocked), r.Record, r.Measured)
		g.ui.printSafe("'hg resume --retry %s' runs them again\n", r.Run)
	} else {
		g.ui.printf("every done node holds\n")
	}
	if r.Logged != "" {
		g.ui.printSafe("recorded as recheck %s (ref rechecks/%s)\n", r.Logged, r.Run)
	}
}

// recheckReceipt re-measures a receipt of no run: it is verified (and
// replayed) again, and nothing is recorded, there being no run to record
// it in.
func recheckReceipt(ctx context.Context, g *globals, c cid.Cid, trusted []ed25519.PublicKey, replay bool, opts replay.Options, asJSON bool) error {
	var v *verify.Verification
	if err := g.withStore(true, func(st cas.Store) error {
		var err error
		v, err = verify.VerifyReceipt(ctx, st, c, trusted)
		return err
	}); err != nil {
		return err
	}
	out := map[string]any{"receipt": c.String(), "status": v.Status, "trusted": len(trusted), "replay": replay, "recorded": false}
	problem := ""
	if f := v.FirstFailure(); f != nil {
		problem = f.Name + ": " + f.Detail
	} else if replay {
		res, err := replayOne(ctx, g, c, opts)
		var integ integrityError
		switch {
		case errors.As(err, &integ):
			problem = "replay: " + integ.msg
		case err != nil:
			return err
		default:
			out["agree"], out["transitions"] = res.Agree, res.Total()
			if d := res.Divergence; d != nil {
				problem = "replay: first divergence: " + d.String()
			}
		}
	}
	out["ok"], out["problem"] = problem == "", problem
	if asJSON {
		if err := g.ui.printJSON(out); err != nil {
			return err
		}
	} else {
		g.ui.printSafe("recheck receipt %s (%s) under %s: it is of no run, nothing is recorded\n", c, v.Status, count(len(trusted), "trusted key"))
		if problem == "" {
			g.ui.printf("it holds\n")
		} else {
			g.ui.printSafe("it no longer holds: %s\n", problem)
		}
	}
	if problem != "" {
		return integrityError{msg: textsafe.Sprintf("re-measurement of receipt %s: %s", c, problem)}
	}
	return nil
}

func newWithdrawCmd(g *globals) *cobra.Command {
	var why string
	cmd := &cobra.Command{
		Use:   "withdraw RUN NODE --why TEXT",
		Short: "delete a node from a run, for good, saying why",
		Long: `Withdraw NODE from RUN: the node is deleted, whatever its state (its
receipt stays in the record), what depends on it is blocked, and a done run
whose outcome needed it is halted. No retry runs it again. The withdrawal is
recorded in the run with who made it (the user and the store's runner key)
and why; 'hg status', 'hg report' and 'hg verify' show it.`,
		Args: exactArgs(2, "RUN and NODE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkWhy(cmd, why); err != nil {
				return err
			}
			run, node := args[0], args[1]
			return onIdleRun(cmd.Context(), g, run, func(st cas.Store, dir string) error {
				by := actorOf(dir)
				rec, blocked, err := scheduler.Withdraw(cmd.Context(), st, run, node, by, why, stamp())
				if err != nil {
					return notAllowed(err)
				}
				g.ui.printSafe("%s/%s deleted by %s: %s\n", run, node, by.Who, why)
				if len(blocked) > 0 {
					g.ui.printSafe("blocked below it: %s\n", strings.Join(blocked, ", "))
				}
				g.ui.printSafe("run %s: %s: %s\n", run, rec.Status, rec.Reason)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&why, "why", "", "why the node is withdrawn (recorded in the run)")
	return cmd
}

func newSupersedeCmd(g *globals) *cobra.Command {
	var why, by string
	cmd := &cobra.Command{
		Use:   "supersede RUN NODE --by RUN2/NODE2 --why TEXT",
		Short: "mark a node's work rewritten: a later accepted receipt supersedes it",
		Long: `Mark NODE of RUN rewritten: its work is superseded by the receipt of
NODE2 of RUN2, which must be done there (a PASS its scheduler accepted) and
verify now against the keys the store trusts. What depends on NODE in RUN is
blocked, a done run whose outcome needed it is halted, and no retry runs it
again: the work goes on where the later receipt is. Recorded in the run with
who made it, why, and the later receipt; 'hg verify' checks that receipt.`,
		Args: exactArgs(2, "RUN and NODE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkWhy(cmd, why); err != nil {
				return err
			}
			byRun, byNode, ok := strings.Cut(by, "/")
			if !ok || scheduler.CheckRunID(byRun) != nil || byNode == "" {
				return usageError{fmt.Errorf("%s: --by: want RUN/NODE, the done node whose receipt supersedes the work, got %q", cmd.CommandPath(), by)}
			}
			run, node := args[0], args[1]
			return onIdleRun(cmd.Context(), g, run, func(st cas.Store, dir string) error {
				trusted, err := storeTrust(dir)
				if err != nil {
					return err
				}
				who := actorOf(dir)
				rec, blocked, err := scheduler.Supersede(cmd.Context(), st, run, node, byRun, byNode, trusted, who, why, stamp())
				if err != nil {
					return notAllowed(err)
				}
				g.ui.printSafe("%s/%s rewritten: superseded by %s, said %s: %s\n", run, node, by, who.Who, why)
				if len(blocked) > 0 {
					g.ui.printSafe("blocked below it: %s\n", strings.Join(blocked, ", "))
				}
				g.ui.printSafe("run %s: %s: %s\n", run, rec.Status, rec.Reason)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&by, "by", "", "the done node `RUN2/NODE2` whose accepted receipt supersedes the work")
	cmd.Flags().StringVar(&why, "why", "", "why (recorded in the run)")
	return cmd
}

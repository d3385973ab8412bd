package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/replay"
	"github.com/haygent/hg/internal/textsafe"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
	"github.com/spf13/cobra"
)

func newReplayCmd(g *globals) *cobra.Command {
	var (
		opts   replay.Options
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "replay RECEIPT|RUN [--workspace DIR] [--json]",
		Short: "re-execute an invocation or a run with the recorded slot outputs and compare",
		Long: `Re-execute the invocation of RECEIPT (a CID or a pin), or every node of RUN
that has a receipt (a run id, or the CID of a run record) in topological
order, in a scratch store in memory: the store gets nothing new. Slots are
answered with the responses recorded in the ledger, in order; the package
and the workspace come from the store (the workspace from the receipt's
snapshot; --workspace DIR starts from a copy of DIR instead, when the
snapshot is not in the store). Exec steps run their commands again.

Transitions are compared by the CIDs of their work, never by time stamps
(see docs/verification.md, "Replay"). Prints the agreement and the first divergence, with
both CIDs. Exit 0 when everything agrees, 4 on any divergence or when a block
the receipt reaches is missing or damaged, 1 for an unknown receipt or run.`,
		Args: exactArgs(1, "one RECEIPT or RUN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReplay(cmd.Context(), g, args[0], opts, asJSON)
		},
	}
	cmd.Flags().StringVar(&opts.Workspace, "workspace", "", "start from a copy of `DIR` instead of the recorded workspace snapshot")
	cmd.Flags().BoolVar(&opts.AllowUnisolated, "allow-unisolated", false, "run exec steps with less than their whole confinement where the kernel cannot give it (the receipt says what was missing)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the comparison as JSON")
	return cmd
}

// replayJSON is one receipt's comparison, for --json.
type replayJSON struct {
	Node          string             `json:"node,omitempty"`
	Receipt       string             `json:"receipt"`
	Run           string             `json:"run"`
	Haygent       string             `json:"haygent"`
	Workspace     string             `json:"workspace"`
	WorkspaceTree string             `json:"workspace_tree,omitempty"`
	Agree         int                `json:"agree"`
	Transitions   int                `json:"transitions"`
	Recorded      int                `json:"recorded"`
	Replayed      int                `json:"replayed"`
	OK            bool               `json:"ok"`
	Divergence    *replay.Divergence `json:"divergence"`
	Notes         []string           `json:"notes"`
}

func toJSON(node string, r *replay.Result) replayJSON {
	j := replayJSON{Node: node, Receipt: r.Receipt.String(), Run: r.Run, Haygent: r.Haygent, Workspace: r.Workspace,
		Agree: r.Agree, Transitions: r.Total(), Recorded: r.Recorded, Replayed: r.Replayed,
		OK: r.OK(), Divergence: r.Divergence, Notes: r.Notes}
	if r.WorkspaceTree.Defined() {
		j.WorkspaceTree = r.WorkspaceTree.String()
	}
	if j.Notes == nil {
		j.Notes = []string{}
	}
	return j
}

// replayTarget is what the argument names: a receipt, or a run's nodes.
type replayTarget struct {
	receipt cid.Cid
	run     *scheduler.Record
	record  cid.Cid
	order   []string // nodes with a receipt, in topological order
}

func runReplay(ctx context.Context, g *globals, arg string, opts replay.Options, asJSON bool) error {
	if opts.Workspace != "" {
		// Checked before anything is read, so a typo costs nothing.
		if info, err := os.Stat(opts.Workspace); err != nil || !info.IsDir() {
			return fmt.Errorf("--workspace %s: not a directory", opts.Workspace)
		}
		// The store is never copied with the workspace that holds it.
		if dir, err := locateStore(g.store); err == nil {
			opts.StoreDir = dir
		}
	}
	var t replayTarget
	err := g.withStore(true, func(st cas.Store) error {
		var err error
		t, err = findReplayTarget(ctx, st, arg)
		return err
	})
	if err != nil {
		return err
	}
	if t.run == nil {
		res, err := replayOne(ctx, g, t.receipt, opts)
		if err != nil {
			return err
		}
		if asJSON {
			if err := g.ui.printJSON(toJSON("", res)); err != nil {
				return err
			}
		} else {
			// The ledger's text (run, Haygent, step names, recorded
			// values) is printed escaped, each field on its line.
			g.ui.printSafe("replay %s (%s, run %s)\n", res.Receipt, res.Haygent, res.Run)
			if res.Workspace == replay.WorkspaceSnapshot {
				g.ui.printSafe("workspace: the recorded snapshot %s\n", res.WorkspaceTree)
			}
			for _, n := range res.Notes {
				g.ui.printSafe("%s\n", n)
			}
			g.ui.printSafe("%d/%d transitions agree\n", res.Agree, res.Total())
			if d := res.Divergence; d != nil {
				g.ui.printSafe("first divergence: %s\n", d)
			}
		}
		if d := res.Divergence; d != nil {
			return integrityError{msg: textsafe.Sprintf("replay of %s diverges from its ledger at %s", res.Receipt, where(d))}
		}
		return nil
	}

	if !asJSON {
		g.ui.printSafe("replay run %s (%s): %d node(s) with a receipt\n", t.run.Run, t.run.Name, len(t.order))
	}
	receipts := map[string]cid.Cid{}
	for _, n := range t.run.Nodes {
		if n.Receipt != nil {
			receipts[n.Name] = n.Receipt.Cid
		}
	}
	var (
		agree, total int
		diverged     []string
		nodes        = []replayJSON{}
	)
	for _, name := range t.order {
		res, err := replayOne(ctx, g, receipts[name], opts)
		if err != nil {
			return fmt.Errorf("node %s: %w", textsafe.Escape(name), err)
		}
		agree += res.Agree
		total += res.Total()
		if !res.OK() {
			diverged = append(diverged, name)
		}
		if asJSON {
			nodes = append(nodes, toJSON(name, res))
			continue
		}
		g.ui.printSafe("node %s: %d/%d transitions agree\n", name, res.Agree, res.Total())
		for _, n := range res.Notes {
			g.ui.printSafe("  %s\n", n)
		}
		if d := res.Divergence; d != nil {
			g.ui.printSafe("  first divergence: %s\n", d)
		}
	}
	if asJSON {
		if err := g.ui.printJSON(map[string]any{"run": t.run.Run, "record": t.record.String(), "workorder": t.run.Name,
			"nodes": nodes, "agree": agree, "transitions": total, "ok": len(diverged) == 0}); err != nil {
			return err
		}
	} else {
		g.ui.printSafe("run: %d/%d transitions agree\n", agree, total)
	}
	if len(diverged) > 0 {
		return integrityError{msg: textsafe.Sprintf("replay of run %s diverges from its ledger at node(s) %s", t.run.Run, strings.Join(diverged, ", "))}
	}
	return nil
}

func where(d *replay.Divergence) string {
	if d.Seq < 0 {
		return "the receipt: " + d.Field
	}
	return fmt.Sprintf("seq %d (step %s): %s", d.Seq, d.Step, d.Field)
}

// replayOne replays one receipt. The store is open, shared, only while the
// replay reads what it needs; the steps run after it is closed, so a long
// replay never keeps a writer waiting.
func replayOne(ctx context.Context, g *globals, receipt cid.Cid, opts replay.Options) (*replay.Result, error) {
	var p *replay.Replayer
	err := g.withStore(true, func(st cas.Store) error {
		var err error
		p, err = replay.Prepare(ctx, st, receipt, opts)
		return err
	})
	if err != nil {
		return nil, replayErr(err)
	}
	defer p.Close()
	res, err := p.Run(ctx)
	return res, replayErr(err)
}

// replayErr makes a missing block of a ledger an integrity finding.
func replayErr(err error) error {
	if errors.Is(err, replay.ErrIncomplete) {
		return integrityError{msg: err.Error()}
	}
	return err
}

// findReplayTarget resolves the argument: a run id, or a CID or pin naming
// a receipt or a run record.
func findReplayTarget(ctx context.Context, st cas.Store, arg string) (replayTarget, error) {
	var t replayTarget
	c, err := resolveRoot(ctx, st, arg)
	if err != nil {
		return t, err
	}
	typ, err := ledgerType(ctx, st, c)
	if err != nil {
		return t, err
	}
	if typ == ledger.TypeReceipt {
		t.receipt = c
		return t, nil
	}
	if t.run, err = scheduler.LoadRecordAt(ctx, st, c); err != nil {
		return t, fmt.Errorf("run record %s: %w", c, err)
	}
	t.record = c
	// The run's topological order: the waves of its stored Work Order.
	_, wo, err := scheduler.LoadWorkOrder(ctx, st, t.run)
	if err != nil {
		return t, fmt.Errorf("run %s: work order: %w", t.run.Run, err)
	}
	has := map[string]bool{}
	for _, n := range t.run.Nodes {
		has[n.Name] = n.Receipt != nil
	}
	for _, wave := range wo.Waves() {
		for _, name := range wave {
			if has[name] {
				t.order = append(t.order, name)
				delete(has, name)
			}
		}
	}
	var rest []string // on no wave: cannot happen in a validated Work Order
	for name, ok := range has {
		if ok {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	t.order = append(t.order, rest...)
	return t, nil
}

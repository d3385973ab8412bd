package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
	"github.com/spf13/cobra"
)

// haltError marks a run that ended in a truthful HALT: exit 3.
type haltError struct{ msg string }

func (e haltError) Error() string { return e.msg }

func newHaygentCmd(g *globals) *cobra.Command {
	return groupCmd("haygent", "check and run Haygent packages", newHaygentCheckCmd(g), newHaygentRunCmd(g))
}

func newHaygentCheckCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check DIR",
		Short: "lint a Haygent package: schemas, grants, slots, gates that cannot fail",
		Args:  exactArgs(1, "one package DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := haygent.Load(args[0])
			var pe *haygent.ProblemsError
			if errors.As(err, &pe) {
				if asJSON {
					if err := g.ui.printJSON(map[string]any{"ok": false, "problems": pe.Problems}); err != nil {
						return err
					}
				} else {
					for _, p := range pe.Problems {
						g.ui.printf("%s: %s\n", filepath.Join(args[0], p.File), p.Message)
					}
				}
				return fmt.Errorf("%s: %d problem(s)", args[0], len(pe.Problems))
			}
			if err != nil {
				return err
			}
			if asJSON {
				return g.ui.printJSON(map[string]any{"ok": true, "problems": []any{}})
			}
			g.ui.printf("%s: ok\n", args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {ok, problems} as JSON")
	return cmd
}

func newHaygentRunCmd(g *globals) *cobra.Command {
	var (
		inputFile, wsDir, adapterSpec, model, pin string
		allowUnisolated, asJSON, force            bool
	)
	cmd := &cobra.Command{
		Use:   "run DIR [--input FILE] [--workspace DIR] [--adapter script:FILE|exec:CMD|openai]",
		Short: "invoke a Haygent once; print the receipt CID; exit 0 on PASS, 3 on HALT",
		Long: `Invoke the Haygent package DIR on the input (a JSON file, - for stdin, or {}
when absent), in the workspace DIR (default: a new empty directory). Exec steps
run in scratch copies of the workspace; changes the write grants allow are
applied to it, every other change is denied and recorded.

Slots are answered by --adapter: script:FILE replays recorded proposals,
exec:CMD runs a command (request JSON on stdin, proposal on stdout), openai
calls an OpenAI-compatible endpoint (HG_OPENAI_BASE_URL, HG_OPENAI_API_KEY,
--model or HG_OPENAI_MODEL).

The receipt is signed with the store's runner key (made on first use; see
'hg key'). Exit 0 on PASS, 3 on HALT.`,
		Args: exactArgs(1, "one package DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			pkg, err := haygent.Load(args[0])
			if err != nil {
				return err
			}
			input, err := readInput(inputFile, g.ui.stdin)
			if err != nil {
				return err
			}
			adapter, err := newAdapter(adapterSpec, model)
			if err != nil {
				return err
			}
			if wsDir != "" {
				if info, err := os.Stat(wsDir); err != nil || !info.IsDir() {
					return fmt.Errorf("--workspace %s: not a directory", wsDir)
				}
			}
			dir, err := locateStore(g.store)
			if err != nil {
				return err
			}
			return g.withStore(false, func(st cas.Store) error {
				key, err := runnerKey(g, dir)
				if err != nil {
					return err
				}
				opts := haygent.Options{
					Store: st, Key: key, Adapter: adapter, Workspace: wsDir, StoreDir: dir, AllowUnisolated: allowUnisolated,
				}
				if g.ui.stderrIsTerminal() {
					opts.Log = func(format string, args ...any) { fmt.Fprintf(g.ui.stderr, "hg: "+format+"\n", args...) }
				}
				if pin != "" {
					if err := cas.CheckPinName(pin); err != nil {
						return usageError{err}
					}
				}
				// The command that replays this invocation: hg replay takes
				// the receipt, by pin or CID (which the receipt cannot
				// contain), not its run id.
				opts.Replay = "hg replay RECEIPT"
				if pin != "" {
					opts.Replay = "hg replay " + pin
				}
				if pin != "" && !force {
					// Refused before the work, not after it.
					if old, taken, err := pinnedElsewhere(cmd.Context(), st, pin, cid.Undef); err != nil {
						return err
					} else if taken {
						return errPinTaken(pin, old)
					}
				}
				res, err := haygent.Run(cmd.Context(), pkg, input, opts)
				if err != nil {
					return err
				}
				if pin != "" {
					if err := st.SetPin(cmd.Context(), pin, res.ReceiptCID); err != nil {
						return err
					}
				}
				if asJSON {
					out := map[string]any{"receipt": res.ReceiptCID.String(), "status": res.Receipt.Status, "run": res.Receipt.Run}
					if h := res.Receipt.Halt; h != nil {
						out["failed_gate"], out["verdict"], out["reason"] = h.FailedGate, h.Verdict, h.Reason
					}
					if err := g.ui.printJSON(out); err != nil {
						return err
					}
				} else {
					g.ui.printf("%s\n", res.ReceiptCID)
				}
				if res.Receipt.Status != ledger.StatusPass {
					h := res.Receipt.Halt
					what := h.Verdict
					if h.FailedGate != "" {
						what = h.FailedGate + " " + h.Verdict
					}
					return haltError{fmt.Sprintf("HALT (%s): %s", what, h.Reason)}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&inputFile, "input", "", "the input packet: a JSON `FILE`, or - for stdin")
	cmd.Flags().StringVar(&wsDir, "workspace", "", "the workspace `DIR` the Haygent works on")
	cmd.Flags().StringVar(&adapterSpec, "adapter", "", "who answers slots: script:FILE, exec:CMD or openai")
	cmd.Flags().StringVar(&model, "model", "", "the model, for --adapter openai")
	cmd.Flags().BoolVar(&allowUnisolated, "allow-unisolated", false, "run exec steps with less than their whole confinement where the kernel cannot give it (the receipt says what was missing)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {receipt, status, run, ...} as JSON")
	cmd.Flags().StringVar(&pin, "pin", "", "pin the receipt (and so the whole run) under `NAME`")
	cmd.Flags().BoolVarP(&force, "force", "f", false, "with --pin, move the pin if it names another receipt")
	return cmd
}

func readInput(path string, stdin io.Reader) (map[string]any, error) {
	var data []byte
	var err error
	switch path {
	case "":
		return map[string]any{}, nil
	case "-":
		data, err = io.ReadAll(stdin)
	default:
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	// Strictly: a duplicate key or a number out of range is the input's
	// fault and is named here, before any contract sees the value.
	m, err := decodeJSONObject("input", path, data)
	if err != nil {
		return nil, err
	}
	return cas.FromJSON(m).(map[string]any), nil
}

// decodeJSONObject parses data, read from the file at path, as one JSON
// object, strictly ([cas.DecodePlainJSON]): a duplicate key, a number out
// of range or invalid UTF-8 is refused with its byte offset. Errors read
// "WHAT PATH: ..." and are bad input (exit 1). Numbers are left as
// DecodePlainJSON returns them: apply [cas.FromJSON] for the data model.
func decodeJSONObject(what, path string, data []byte) (map[string]any, error) {
	v, err := cas.DecodePlainJSON(data)
	if err != nil {
		if t := strings.TrimLeft(string(data), " \t\r\n"); !strings.HasPrefix(t, "{") {
			return nil, fmt.Errorf("%s %s: want one JSON object: %v", what, path, err)
		}
		return nil, fmt.Errorf("%s %s: %v", what, path, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s %s: want one JSON object, not %s", what, path, cas.KindOf(v))
	}
	return m, nil
}

func newAdapter(spec, model string) (haygent.Adapter, error) {
	kind, arg, _ := strings.Cut(spec, ":")
	switch kind {
	case "":
		return nil, nil
	case "script":
		return haygent.LoadScript(arg)
	case "exec":
		argv := strings.Fields(arg)
		if len(argv) == 0 {
			return nil, usageError{errors.New("--adapter exec:CMD needs a command")}
		}
		return &haygent.ExecAdapter{Argv: argv}, nil
	case "openai":
		return haygent.NewOpenAIFromEnv(model)
	}
	return nil, usageError{fmt.Errorf("--adapter %q: want script:FILE, exec:CMD or openai", spec)}
}

// keyPath is where a store keeps its runner key.
func keyPath(storeDir string) string { return filepath.Join(storeDir, "keys", "runner.key") }

// runnerKey loads the store's signing key, making one on first use.
func runnerKey(g *globals, storeDir string) (ed25519.PrivateKey, error) {
	key, err := ledger.LoadKey(keyPath(storeDir))
	if errors.Is(err, ledger.ErrNoKey) {
		key, err = ledger.GenerateKey(keyPath(storeDir))
		if err == nil {
			g.ui.hintf("made a runner key for this store: %s", ledger.FormatPublicKey(key.Public().(ed25519.PublicKey)))
		}
	}
	return key, err
}

func newReportCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "report RUN|RECEIPT [--json]",
		Short: "the report of a run or an invocation, rendered from the ledger only",
		Args:  exactArgs(1, "one RECEIPT CID or pin"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withStore(true, func(st cas.Store) error {
				ctx := cmd.Context()
				c, err := resolveRoot(ctx, st, args[0]) // a CID, a pin, RUN or RUN/NODE
				if err != nil {
					return err
				}
				// A block that is not a receipt is the wrong argument, not
				// damage: only what fails to decode is an integrity error.
				typ, err := ledgerType(ctx, st, c)
				if err != nil {
					return err
				}
				if typ == scheduler.TypeRun {
					rec, err := scheduler.LoadRecordAt(ctx, st, c)
					if err != nil {
						return err
					}
					if asJSON {
						// The run record itself, as hg dag get shows it:
						// each node's state and the receipt it accepted.
						return printBlockJSON(ctx, g, st, c)
					}
					return runReport(ctx, g, st, rec.Run)
				}
				l, err := ledger.LoadLedger(ctx, st, c)
				if err != nil {
					return err
				}
				if !asJSON {
					return reportReceipt(ctx, g, st, l) // verified, as hg verify would (cmd_verify.go)
				}
				return writeLedgerJSON(ctx, g, st, l)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the receipt and every record it links to as DAG-JSON (for a run: its record)")
	return cmd
}

// writeLedgerJSON prints the stored records of a ledger as one DAG-JSON
// document, exactly as stored.
func writeLedgerJSON(ctx context.Context, g *globals, st cas.Store, l *ledger.Ledger) error {
	node := func(c cid.Cid) (any, error) {
		data, err := st.Get(ctx, c)
		if err != nil {
			return nil, err
		}
		return cas.DecodeNode(data)
	}
	doc := map[string]any{"receipt_cid": l.ReceiptCID}
	var err error
	if doc["receipt"], err = node(l.ReceiptCID); err != nil {
		return err
	}
	var trans []any
	next := &l.Receipt.Head
	for next != nil {
		n, err := node(next.Cid)
		if err != nil {
			return err
		}
		trans = append([]any{n}, trans...)
		m, _ := n.(map[string]any)
		p, ok := m["prior"].(cid.Cid)
		if !ok {
			break
		}
		next = &cas.Link{Cid: p}
	}
	doc["transitions"] = trans
	for _, set := range []struct {
		key  string
		cids []cid.Cid
	}{{"evidence", keys(l.Evidence)}, {"gates", keys(l.Gates)}, {"slot_calls", keys(l.SlotCalls)}} {
		m := map[string]any{}
		for _, c := range set.cids {
			if m[c.String()], err = node(c); err != nil {
				return err
			}
		}
		doc[set.key] = m
	}
	out, err := cas.EncodeJSON(doc)
	if err != nil {
		return err
	}
	g.ui.printf("%s\n", out)
	return nil
}

func keys[V any](m map[cid.Cid]V) []cid.Cid {
	out := make([]cid.Cid, 0, len(m))
	for c := range m {
		out = append(out, c)
	}
	return out
}

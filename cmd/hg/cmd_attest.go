package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent/attest"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/verify"
	"github.com/haygent/hg/internal/textsafe"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
	"github.com/spf13/cobra"
)

func newAttestCmd(g *globals) *cobra.Command {
	var (
		out        string
		asJSON     bool
		withoutRun bool
	)
	cmd := &cobra.Command{
		Use:   "attest RUN|RUN/NODE|RECEIPT -o FILE.jsonl|- [--without-run]",
		Short: "write accepted receipts as in-toto attestations in DSSE envelopes (JSON Lines)",
		Long: `Write each accepted receipt as an in-toto Statement v1 in a DSSE envelope
signed with this store's runner key, one envelope per line (JSON Lines).

For a RUN (a run id or the CID of its record) the run is verified first as
'hg verify RUN' does, against the keys this store trusts (its runner key and
'hg key trust'); if any check fails nothing is written (exit 4). Then every
node the scheduler accepted (state done) is attested, in node name order;
RUN/NODE attests that node alone. A record must be its run's latest in this
store: an older one, or one of a run this store does not have, is refused
(exit 1). For a RECEIPT (a CID or a pin), the receipt and its upstream
receipts are verified as 'hg verify RECEIPT' does; a receipt that does not
verify is refused (exit 4), one that verifies but is a HALT is refused too
(exit 1): hg attests only what it verified to PASS. A receipt of a node of a
run must be what the run stands on now: its node done with it in the run's
latest record, and no withdrawal or rewrite naming it (else exit 1). A
receipt of a run this store does not have (from a bundle) is refused unless
--without-run asks to attest it on its own verification. Nothing that a
recheck regressed in any run of this store is attested, nor anything built
on it (exit 1).

Subjects: every file the run wrote, named by its path and the sha256 of its
content (read from the store, every block hashed again, and checked against
the run's mutation evidence), and the final workspace, named "." with the
sha256 of its root block. The predicate (https://haygent.dev/hg/receipt/v1,
see SPEC.md) is the receipt's record: Haygent, status, gates and verdicts,
evidence, denials, limitations, the receipt's CID and signer. The envelope's
keyid is the runner key, ed25519:...; the receipt may have been signed by
another trusted key (a worker's), which the predicate names.

The file is written whole or not at all; -o - writes to standard output.`,
		Args: exactArgs(1, "one RUN, RUN/NODE or RECEIPT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case out == "":
				return usageError{errors.New("give -o FILE.jsonl (or -o - for standard output)")}
			case out == "-" && asJSON:
				return usageError{errors.New("--json needs -o FILE.jsonl: standard output holds the envelopes")}
			}
			if out != "-" {
				if err := outsideStore(g, out); err != nil {
					return err
				}
			}
			return runAttest(cmd.Context(), g, args[0], out, asJSON, withoutRun)
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the envelopes to `FILE.jsonl` (- for standard output)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {file, key, envelopes: [{node, receipt, subjects}]} as JSON")
	cmd.Flags().BoolVar(&withoutRun, "without-run", false, "attest a RECEIPT of a run this store does not have on the receipt's own verification")
	return cmd
}

// attested is one envelope written, as hg attest reports it.
type attested struct {
	Node     string   `json:"node,omitempty"`
	Receipt  string   `json:"receipt"`
	Subjects []string `json:"subjects"`
}

func runAttest(ctx context.Context, g *globals, arg, out string, asJSON, withoutRun bool) error {
	dir, err := locateStore(g.store)
	if err != nil {
		return err
	}
	key, err := ledger.LoadKey(keyPath(dir))
	if errors.Is(err, ledger.ErrNoKey) {
		return hinted{fmt.Errorf("attest: %w: the envelopes are signed with the store's runner key", err), "run 'hg key gen' to make one"}
	}
	if err != nil {
		return err
	}
	trusted, err := storeTrust(dir)
	if err != nil {
		return err
	}
	signer := attest.NewSigner(key)
	keyID, _ := signer.KeyID()
	var (
		envs []*attest.Envelope
		list []attested
	)
	err = g.withStore(true, func(st cas.Store) error {
		update, finish := g.ui.countProgress("verify", 1000)
		targets, err := attestTargets(ctx, st, arg, trusted, withoutRun, &scheduler.VerifyOptions{Progress: update})
		finish()
		if err != nil {
			return err
		}
		for _, t := range targets {
			stmt, err := attest.Build(ctx, st, t)
			if err != nil {
				return attestError(err)
			}
			env, err := attest.Sign(ctx, stmt, signer)
			if err != nil {
				return err
			}
			a := attested{Receipt: stmt.Predicate.Receipt, Subjects: []string{}}
			if t.Node != nil {
				a.Node = t.Node.Node
			}
			for _, s := range stmt.Subject {
				a.Subjects = append(a.Subjects, s.Name)
			}
			envs, list = append(envs, env), append(list, a)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := writeOut(out, g.ui.stdout, func(w io.Writer) error { return attest.WriteJSONLines(w, envs) }); err != nil {
		return err
	}
	if out == "-" {
		return nil
	}
	if asJSON {
		return g.ui.printJSON(map[string]any{"file": out, "key": keyID, "envelopes": list})
	}
	for _, a := range list {
		what := "receipt " + a.Receipt
		if a.Node != "" {
			what = "node " + a.Node + " (" + what + ")"
		}
		g.ui.printSafe("attested %s: %s\n", what, strings.Join(a.Subjects, " "))
	}
	g.ui.printSafe("wrote %s to %s, signed by %s\n", count(len(envs), "envelope"), out, keyID)
	return nil
}

// attestError maps what attest.Build refuses to an exit code: a receipt
// that does not verify, or an artifact that disagrees with the run's
// evidence, is an integrity failure (4); a HALT, or a receipt with
// nothing to attest, an error (1).
func attestError(err error) error {
	if errors.Is(err, attest.ErrNotVerified) || errors.Is(err, attest.ErrArtifact) {
		return integrityError{msg: textsafe.Sprintf("attest refused: %v", err)}
	}
	if errors.Is(err, attest.ErrNotPass) || errors.Is(err, attest.ErrNoSubject) {
		return fmt.Errorf("attest refused: %w", err)
	}
	return err
}

// attestTargets verifies what arg names against trusted and returns the
// receipts to attest: a run's accepted nodes (one node's, for RUN/NODE),
// or a receipt its run still stands on (withoutRun: or whose run st does
// not have). A failed check is an integrity error naming it. opts go to
// a run's verification.
func attestTargets(ctx context.Context, st cas.Store, arg string, trusted []ed25519.PublicKey, withoutRun bool, opts *scheduler.VerifyOptions) ([]attest.Target, error) {
	var (
		c    cid.Cid
		node string
		err  error
	)
	if isRunID(arg) {
		run, n, _ := strings.Cut(arg, "/")
		node = n
		if c, err = st.GetRef(ctx, scheduler.RefNamespace, run); err != nil {
			return nil, fmt.Errorf("run %s: %w", run, err)
		}
	} else if c, err = resolve(ctx, st, arg); err != nil {
		return nil, err
	}
	typ, err := ledgerType(ctx, st, c)
	if err != nil {
		return nil, err
	}
	if typ == scheduler.TypeRun {
		return runTargets(ctx, st, c, node, trusted, opts)
	}
	vs, err := verify.VerifyReceiptChain(ctx, st, c, trusted)
	if err != nil {
		return nil, err
	}
	for _, v := range vs {
		if f := v.FirstFailure(); f != nil || !v.OK() {
			detail, check := "no checks", "verification"
			if f != nil {
				check, detail = f.Name, f.Detail
			}
			return nil, attestVerifyError("receipt "+v.Receipt.String(), check, detail)
		}
	}
	if len(vs) == 0 {
		return nil, attestVerifyError("receipt "+c.String(), "verification", "no checks")
	}
	v := vs[len(vs)-1]
	if v.Status == ledger.StatusPass { // a HALT is refused as such by attest.Build
		chain := make([]cid.Cid, len(vs))
		for i, u := range vs {
			chain[i] = u.Receipt
		}
		if err := receiptStanding(ctx, st, c, v.Run, chain, withoutRun); err != nil {
			return nil, err
		}
	}
	return []attest.Target{{Verification: v, Trusted: trusted}}, nil
}

// runTargets verifies the run record c and returns its accepted nodes,
// or only node when it is not "".
func runTargets(ctx context.Context, st cas.Store, c cid.Cid, node string, trusted []ed25519.PublicKey, opts *scheduler.VerifyOptions) ([]attest.Target, error) {
	v, err := scheduler.VerifyRun(ctx, st, c, trusted, opts)
	if err != nil {
		return nil, err
	}
	if n, f := v.FirstFailure(); f != nil || !v.OK() {
		where := "run " + v.Run
		if n != "" {
			where = "node " + n + " of run " + v.Run
		}
		check, detail := "verification", "no checks"
		if f != nil {
			check, detail = f.Name, f.Detail
		}
		return nil, attestVerifyError(where, check, detail)
	}
	rec, err := scheduler.LoadRecordAt(ctx, st, c)
	if err != nil {
		return nil, err
	}
	if err := recordStanding(ctx, st, c, rec); err != nil {
		return nil, err
	}
	var out []attest.Target
	found := false
	for i, nv := range v.Nodes {
		if node != "" && nv.Node != node {
			continue
		}
		found = true
		nr := rec.Nodes[i]
		if nr.Name != nv.Node {
			return nil, fmt.Errorf("run %s: node %s: the record and its verification disagree", v.Run, nv.Node)
		}
		if nv.State != dag.Done {
			if node != "" {
				return nil, textsafeError("node %s of run %s is %s, not accepted: nothing to attest", node, v.Run, nv.State)
			}
			continue
		}
		if nr.Acceptance == nil || nv.Verification == nil {
			return nil, attestVerifyError("node "+nv.Node+" of run "+v.Run, scheduler.CheckAcceptance, "a done node without an acceptance or a verified receipt")
		}
		out = append(out, attest.Target{Verification: nv.Verification, Checks: nv.Checks, Trusted: trusted, Node: &attest.WorkOrderNode{
			Run: v.Run, Node: nv.Node, Record: c.String(), Acceptance: nr.Acceptance.Cid.String(), Memo: nr.Memo}})
	}
	switch {
	case node != "" && !found:
		return nil, textsafeError("run %s has no node %q", v.Run, node)
	case len(out) == 0:
		return nil, textsafeError("run %s has no accepted node: nothing to attest", v.Run)
	}
	return out, nil
}

// attestVerifyError is a failed verification of what hg attest was to
// attest: exit 4, nothing written.
func attestVerifyError(where, check, detail string) error {
	hint := ""
	if check == verify.CheckTrust {
		hint = "if you trust that runner, say so: 'hg key trust PUBKEY|FILE'"
	}
	return integrityError{msg: textsafe.Sprintf("attest refused: verification failed: %s: %s: %s", where, check, detail), hint: hint}
}

// textsafeError is an error whose arguments, from a record, are escaped.
func textsafeError(format string, args ...any) error {
	return errors.New(textsafe.Sprintf(format, args...))
}

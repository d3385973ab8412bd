package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/report"
	"github.com/haygent/hg/haygent/verify"
	"github.com/haygent/hg/internal/gcpolicy"
	"github.com/haygent/hg/internal/textsafe"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
	"github.com/spf13/cobra"
)

// trustFile lists, one per line, the runner keys a store trusts besides
// its own ('hg key trust').
func trustFile(storeDir string) string { return filepath.Join(storeDir, "keys", "trusted") }

// readTrustFile reads the keys of a trust file; a missing file is none.
func readTrustFile(path string) ([]ed25519.PublicKey, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var keys []ed25519.PublicKey
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := ledger.ParsePublicKey(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, n, err)
		}
		keys = append(keys, k)
	}
	return keys, sc.Err()
}

// storeTrust returns the keys a store trusts: its own runner key, if it
// has one, and those of its trust file.
func storeTrust(storeDir string) ([]ed25519.PublicKey, error) {
	keys, err := readTrustFile(trustFile(storeDir))
	if err != nil {
		return nil, err
	}
	own, err := ledger.LoadKey(keyPath(storeDir))
	switch {
	case err == nil:
		keys = append(keys, own.Public().(ed25519.PublicKey))
	case !errors.Is(err, ledger.ErrNoKey):
		return nil, err
	}
	return keys, nil
}

func newVerifyCmd(g *globals) *cobra.Command {
	var (
		bundle   string
		keys     []string
		keysFile string
		asJSON   bool
		verbose  bool
	)
	cmd := &cobra.Command{
		Use:   "verify [RUN|RECEIPT] [--bundle FILE.car] [--key PUBKEY ...] [--json]",
		Short: "check a receipt chain or a whole run offline, from the store or a bundle alone",
		Long: `Verify a receipt, with every upstream receipt it was built from, or a run
(a run id, or the CID of its record), independently of whoever made them.
Nothing is trusted but the keys: every block is hashed again, hg objects are
decoded strictly, the transition chain is followed link by link (no gap, no
reordering, nothing spliced in from another run), the signature is checked
against the trusted keys, every gate is evaluated again from the stored
evidence by this code, approvals are checked against their window at the
time of use, and for a run every node's acceptance, inputs and upstream
receipts are checked against the stored Work Order. A run record named by
its CID (or a pin) must also be its run's latest in the store, the one
'hg verify RUN' verifies: an older record, which still says what the run
was before a recheck or a withdrawal moved it, fails the check "latest
record".

With --bundle, the bundle is read into memory (every block hashed, nothing
written anywhere) and verified alone: no store is needed, and with no
RUN|RECEIPT every root of the bundle is verified. Trusted keys are those
given with --key or listed in --keys FILE, and, when a store is used, the
store's own runner key and the keys of its trust file ('hg key trust').

Exit 0 when every check holds, 4 when one fails (the first is named).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 || len(args) == 0 && bundle == "" {
				return usageError{fmt.Errorf("%s: want one RUN or RECEIPT (or --bundle FILE.car), got %d arguments", cmd.CommandPath(), len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			defer gcpolicy.Apply()()
			ctx := cmd.Context()
			var trusted []ed25519.PublicKey
			for _, s := range keys {
				k, err := ledger.ParsePublicKey(s)
				if err != nil {
					return usageError{fmt.Errorf("--key: %w", err)}
				}
				trusted = append(trusted, k)
			}
			if keysFile != "" {
				more, err := readTrustFile(keysFile)
				if err != nil {
					return err
				}
				if more == nil {
					return fmt.Errorf("--keys %s: no such file or no keys in it", keysFile)
				}
				trusted = append(trusted, more...)
			}
			w := &verifyWriter{out: g.ui.stdout, verbose: verbose}
			if bundle != "" {
				st := memstore.New()
				roots, err := loadBundle(ctx, st, bundle)
				if err != nil {
					return err
				}
				if len(args) == 1 {
					c, err := cas.ParseCID(args[0])
					if err != nil {
						return usageError{fmt.Errorf("with --bundle, name a CID the bundle holds: %w", err)}
					}
					roots = []cid.Cid{c}
				}
				return verifyTargets(ctx, g, st, roots, trusted, w, asJSON, false, false)
			}
			dir, err := locateStore(g.store)
			if err != nil {
				return err
			}
			own, err := storeTrust(dir)
			if err != nil {
				return err
			}
			trusted = append(trusted, own...)
			return g.withStore(true, func(st cas.Store) error {
				c, err := resolveRoot(ctx, st, args[0])
				if err != nil {
					return err
				}
				// A record named by its CID is checked against its
				// run's latest; a run id names the latest.
				return verifyTargets(ctx, g, st, []cid.Cid{c}, trusted, w, asJSON, !isRunID(args[0]), true)
			})
		},
	}
	cmd.Flags().StringVar(&bundle, "bundle", "", "verify from `FILE.car` alone, read into memory")
	cmd.Flags().StringArrayVar(&keys, "key", nil, "trust receipts signed by `PUBKEY` (ed25519:..., as 'hg key show' prints it); repeatable")
	cmd.Flags().StringVar(&keysFile, "keys", "", "trust the keys listed in `FILE`, one ed25519:... per line (as 'hg key show' prints them)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print every check as JSON")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print every check of every node of a run, not only the failed ones")
	return cmd
}

// loadBundle reads a bundle into st, checking every block, and returns
// its roots. Anything wrong with the file is an integrity failure.
func loadBundle(ctx context.Context, st cas.Store, path string) ([]cid.Cid, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	res, err := cas.ImportCAR(ctx, st, f, nil)
	if errors.Is(err, cas.ErrNotFound) && ctx.Err() == nil {
		// A bundle missing a block its roots reach fails verification,
		// as that block missing from a store does.
		return nil, integrityError{msg: fmt.Sprintf("verification failed: bundle %s: %v", path, err)}
	}
	if err != nil {
		return nil, importError(path, err)
	}
	roots := make([]cid.Cid, len(res.Roots))
	for i, r := range res.Roots {
		roots[i] = r.CID
	}
	return roots, nil
}

// verifyTargets verifies each target (a receipt or a run record), prints
// the tables, and fails with an integrity error naming the first broken
// check. With latest, a run record must also be its run's latest in st
// (the check "latest record").
func verifyTargets(ctx context.Context, g *globals, st cas.Store, targets []cid.Cid, trusted []ed25519.PublicKey, w *verifyWriter, asJSON, latest, standing bool) error {
	start := time.Now()
	var report verifyReport
	for _, c := range targets {
		typ, err := ledgerType(ctx, st, c)
		if err != nil {
			return err
		}
		switch typ {
		case scheduler.TypeRun:
			update, finish := g.ui.countProgress("verify", 1000)
			v, err := scheduler.VerifyRun(ctx, st, c, trusted, &scheduler.VerifyOptions{Progress: update})
			finish()
			if err != nil {
				return err
			}
			if latest && v.Run != "" {
				chk, err := latestRecord(ctx, st, v.Run, c)
				if err != nil {
					return err
				}
				v.Checks = append(v.Checks, chk)
			}
			report.addRun(v)
		default: // a receipt
			vs, err := verify.VerifyReceiptChain(ctx, st, c, trusted)
			if err != nil {
				return err
			}
			if standing {
				if err := markRegressed(ctx, st, vs); err != nil {
					return err
				}
			}
			report.addReceipts(vs)
		}
	}
	report.Seconds = time.Since(start).Seconds()
	if asJSON {
		if err := g.ui.printJSON(report); err != nil {
			return err
		}
	} else {
		w.write(&report)
	}
	if f := report.FirstFailure; f != nil {
		where := "receipt " + f.Receipt
		if f.Node != "" {
			where = "node " + f.Node + " (" + where + ")"
		} else if f.Receipt == "" {
			where = "run " + f.Run
		}
		return verificationError(where, f.Check, f.Detail)
	}
	return nil
}

// verificationError is the error of a failed check: exit 4, the detail
// escaped, and for an untrusted signer how to trust it.
func verificationError(where, check, detail string) error {
	hint := ""
	if check == verify.CheckTrust {
		hint = "if you trust that runner, say so: --key PUBKEY, --keys FILE, or 'hg key trust PUBKEY|FILE'"
	}
	return integrityError{msg: textsafe.Sprintf("verification failed: %s: %s: %s", where, check, detail), hint: hint}
}

// reportReceipt prints the report of a receipt (hg report RECEIPT) with
// its status line judged as hg verify judges the receipt, with the keys
// the store trusts: a receipt whose signer is not trusted, or that fails
// any check, says so there, and the report ends in exit 4.
func reportReceipt(ctx context.Context, g *globals, st cas.Store, l *ledger.Ledger) error {
	dir, err := locateStore(g.store)
	if err != nil {
		return err
	}
	trusted, err := storeTrust(dir)
	if err != nil {
		return err
	}
	vs, err := verify.VerifyReceiptChain(ctx, st, l.ReceiptCID, trusted)
	if err != nil {
		return err
	}
	if err := markRegressed(ctx, st, vs); err != nil {
		return err
	}
	var v *verify.Verification
	if len(vs) > 0 {
		v = vs[len(vs)-1] // the receipt itself comes last
	}
	if err := report.WriteVerifiedReport(g.ui.stdout, l, v); err != nil {
		return err
	}
	if v == nil {
		return integrityError{msg: fmt.Sprintf("verification failed: receipt %s: not verified", l.ReceiptCID)}
	}
	if f := v.FirstFailure(); f != nil {
		return verificationError("receipt "+l.ReceiptCID.String(), f.Name, f.Detail)
	}
	return nil
}

// ledgerType says whether c names a receipt or a run record, the two
// things hg verify and hg replay take; anything else is an error.
func ledgerType(ctx context.Context, st cas.Store, c cid.Cid) (string, error) {
	typ := ""
	if c.Type() == cas.DagCBOR {
		err := st.View(ctx, c, func(data []byte) error {
			n, err := cas.DecodeNode(data)
			if err != nil {
				return err
			}
			m, _ := n.(map[string]any)
			typ, _ = m["type"].(string)
			return nil
		})
		if errors.Is(err, cas.ErrNotFound) {
			return "", fmt.Errorf("%s is not in the store or bundle: %w", c, err)
		}
		if err != nil {
			return "", err
		}
	}
	if c.Type() != cas.DagCBOR {
		if ok, err := st.Has(ctx, c); err != nil {
			return "", err
		} else if !ok {
			return "", fmt.Errorf("%s is not in the store or bundle: %w", c, cas.ErrNotFound)
		}
	}
	switch typ {
	case ledger.TypeReceipt, scheduler.TypeRun:
		return typ, nil
	case "":
		return "", fmt.Errorf("%s is not an hg object, neither a receipt nor a run record", c)
	}
	return "", fmt.Errorf("%s is a %q, neither a receipt nor a run record", c, typ)
}

// verifyReport is what hg verify prints, as a table or as JSON.
type verifyReport struct {
	OK           bool              `json:"ok"`
	Receipts     []receiptReport   `json:"receipts,omitempty"`
	Runs         []runVerifyReport `json:"runs,omitempty"`
	Transitions  int               `json:"transitions"`
	Blocks       int               `json:"blocks"`
	FirstFailure *verifyFailure    `json:"first_failure,omitempty"`
	Seconds      float64           `json:"seconds"`
}

type checkReport struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

type receiptReport struct {
	Receipt     string        `json:"receipt"`
	Run         string        `json:"run"`
	Status      string        `json:"status"`
	Transitions int           `json:"transitions"`
	Blocks      int           `json:"blocks"`
	OK          bool          `json:"ok"`
	Checks      []checkReport `json:"checks"`
	// statusLine is the status as the table prints it, with the
	// receipt's limitations (haygent.StatusLine).
	statusLine string
}

type nodeReport struct {
	Node    string `json:"node"`
	State   string `json:"state"`
	Receipt string `json:"receipt,omitempty"`
	receiptReport
}

type runVerifyReport struct {
	Run    string        `json:"run"`
	Record string        `json:"record"`
	Status string        `json:"status"`
	OK     bool          `json:"ok"`
	Checks []checkReport `json:"checks"`
	Nodes  []nodeReport  `json:"nodes"`
}

type verifyFailure struct {
	Run     string `json:"run,omitempty"`
	Node    string `json:"node,omitempty"`
	Receipt string `json:"receipt,omitempty"`
	Check   string `json:"check"`
	Detail  string `json:"detail"`
}

func checksOf(list []verify.Check) ([]checkReport, bool) {
	out := make([]checkReport, len(list))
	ok := len(list) > 0
	for i, c := range list {
		out[i] = checkReport{c.Name, c.OK, c.Detail}
		ok = ok && c.OK
	}
	return out, ok
}

func (r *verifyReport) fail(f verifyFailure) {
	if r.FirstFailure == nil {
		r.FirstFailure = &f
	}
}

func (r *verifyReport) addReceipts(vs []*verify.Verification) {
	for _, v := range vs {
		checks, ok := checksOf(v.Checks)
		rr := receiptReport{Receipt: v.Receipt.String(), Run: v.Run, Status: v.Status, Transitions: v.Transitions, Blocks: v.Blocks, OK: ok, Checks: checks,
			statusLine: statusOf(v)}
		r.Receipts = append(r.Receipts, rr)
		r.Transitions += v.Transitions
		r.Blocks += v.Blocks
		if f := v.FirstFailure(); f != nil {
			r.fail(verifyFailure{Receipt: rr.Receipt, Check: f.Name, Detail: f.Detail})
		}
	}
	r.OK = r.FirstFailure == nil
}

func (r *verifyReport) addRun(v *scheduler.RunVerification) {
	checks, ok := checksOf(v.Checks)
	rr := runVerifyReport{Run: v.Run, Record: v.Record.String(), Status: v.Status, OK: ok, Checks: checks}
	for _, c := range v.Checks {
		if !c.OK {
			r.fail(verifyFailure{Run: v.Run, Check: c.Name, Detail: c.Detail})
		}
	}
	for _, n := range v.Nodes {
		nc, nok := checksOf(n.Checks)
		nr := nodeReport{Node: n.Node, State: n.State}
		nr.receiptReport = receiptReport{Transitions: n.Transitions, Blocks: n.Blocks, OK: nok || len(n.Checks) == 0, Checks: nc}
		if n.Receipt.Defined() {
			nr.Receipt = n.Receipt.String()
			nr.receiptReport.Receipt = nr.Receipt
		}
		if n.Verification != nil {
			nr.Run, nr.Status = n.Verification.Run, n.Verification.Status
			if o := n.Verification.Object; o != nil {
				// Only the limitations: beside a failed node's state, a
				// bare PASS would say more than the run does.
				nr.statusLine = report.LimitationsNote(o)
			}
		}
		rr.Nodes = append(rr.Nodes, nr)
		r.Transitions += n.Transitions
		r.Blocks += n.Blocks
		for _, c := range n.Checks {
			if !c.OK {
				r.fail(verifyFailure{Run: v.Run, Node: n.Node, Receipt: nr.Receipt, Check: c.Name, Detail: c.Detail})
				break
			}
		}
	}
	rr.OK = rr.OK && v.OK()
	r.Runs = append(r.Runs, rr)
	r.OK = r.FirstFailure == nil
}

// verifyWriter prints a verifyReport as tables.
type verifyWriter struct {
	out     io.Writer
	verbose bool
}

func mark(ok bool) string {
	if ok {
		return "ok"
	}
	return "FAIL"
}

// statusOf is a verified receipt's status as the table prints it: with
// its limitations, when the receipt could be read.
func statusOf(v *verify.Verification) string {
	if v.Object != nil {
		return report.StatusLine(v.Object, nil)
	}
	return textsafe.Escape(v.Status)
}

// checks prints the checks of list. Names, states and details can quote
// the ledger: every one is printed escaped (textsafe), on its own line.
func (w *verifyWriter) checks(tw *tabwriter.Writer, list []checkReport, failedOnly bool) {
	for _, c := range list {
		if failedOnly && c.OK {
			continue
		}
		textsafe.Fprintf(tw, "  %s\t%s\t%s\n", mark(c.OK), c.Name, c.Detail)
	}
}

func (w *verifyWriter) write(r *verifyReport) {
	tw := tabwriter.NewWriter(w.out, 0, 4, 2, ' ', 0)
	for _, rr := range r.Receipts {
		textsafe.Fprintf(tw, "receipt %s  %s  %s  %d transitions  %d blocks\n", rr.Receipt, orDash(rr.Run), orDash(rr.statusLine), rr.Transitions, rr.Blocks)
		w.checks(tw, rr.Checks, false)
	}
	for _, run := range r.Runs {
		textsafe.Fprintf(tw, "run %s  record %s  %s\n", orDash(run.Run), run.Record, orDash(run.Status))
		w.checks(tw, run.Checks, false)
		for _, n := range run.Nodes {
			status := ""
			if n.statusLine != "" {
				status = "  " + n.statusLine
			}
			textsafe.Fprintf(tw, "  %s\tnode %s\t%s%s  %s  %d transitions  %d checks\n", mark(n.OK), n.Node, n.State, status, orDash(n.Receipt), n.Transitions, len(n.Checks))
			w.checks(tw, n.Checks, !w.verbose)
		}
	}
	tw.Flush()
	receipts := len(r.Receipts)
	for _, run := range r.Runs {
		for _, n := range run.Nodes {
			if n.Receipt != "" {
				receipts++
			}
		}
	}
	verdict := "every check holds"
	if !r.OK {
		verdict = "FAILED"
	}
	fmt.Fprintf(w.out, "verified %s, %s, %s in %.2fs: %s\n", count(receipts, "receipt"), count(r.Transitions, "transition"), count(r.Blocks, "block"), r.Seconds, verdict)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// addTrusted appends k to the store's trust file, once.
func addTrusted(storeDir string, k ed25519.PublicKey) error {
	have, err := readTrustFile(trustFile(storeDir))
	if err != nil {
		return err
	}
	for _, h := range have {
		if h.Equal(k) {
			return nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(trustFile(storeDir)), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(trustFile(storeDir), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, ledger.FormatPublicKey(k))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// count writes n things, in the singular for one.
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/verify"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
)

// receiptView is a receipt as a page shows it: the verifier's verdict
// first, then what its ledger records.
type receiptView struct {
	CID     string
	Verdict Verdict
	Checks  []verify.Check
	// Remembered is how many upstream receipts the page took as verified
	// from the server's earlier verification (since RememberedSince)
	// rather than verifying them again; the receipt itself is verified
	// for the page.
	Remembered      int
	RememberedSince string
	// Unread names the runs whose records cannot be read: whether they
	// regressed the receipt is not known.
	Unread []string
	// LedgerError says why the ledger cannot be shown (a block missing
	// or damaged): the verdict says broken, and nothing else is shown.
	LedgerError string

	Haygent, Objective, Run string
	Started, Finished       string
	Package, Input, Output  string
	Workspace, Final        string // tree CIDs
	Permissions             string
	Used                    []string
	Denied                  []ledger.Denied
	Halt                    *haltView
	Repairs, RepairBudget   int64
	Transitions             []transitionView
	Artifacts               []artifactView
	Limitations             []string
	Replay                  string
	Logs                    []logView
	Upstream                []receiptLink
}

// receiptLink is a receipt a page names, with its verdict.
type receiptLink struct {
	CID     string
	Verdict Verdict
}

type haltView struct {
	FailedGate, Verdict, Reason, RestartPoint string
	Attempts                                  int64
	LastEvidence                              []string
	Preserved                                 []artifactView
}

type transitionView struct {
	Seq                      int64
	Step, Kind, Status, Note string
	Attempt                  int64
	Started, Finished        string
	Evidence                 []evidenceView
	Slots                    []slotView
	Gates                    []gateView
	Denied                   []ledger.Denied
}

type evidenceView struct {
	CID, Kind, Subject, ObservedAt string
	Data                           []kv
	Establishes, DoesNot           []string
}

type kv struct{ K, V string }

type slotView struct {
	Slot, Adapter, Model, Verdict string
	Try                           int64
	Errors                        []string
	Response                      string // the raw response, cut at maxInline
	ResponseCID                   string
}

type gateView struct {
	Gate, Predicate, Verdict, Action, Reason, At string
}

type artifactView struct{ Path, File, Digest string }

type logView struct {
	Step         string
	Attempt, Seq int64
	Code         int64
	TimedOut     bool
	Argv         []string
	Streams      []streamView
}

type streamView struct {
	Name, CID, Text, Error string
	Cut, Truncated         bool
}

// maxInline bounds the bytes of a log or a slot response shown in a page;
// the whole is a download.
const maxInline = 64 << 10

type nodeData struct {
	pageData
	Run, Node, State, Reason string
	Attempts                 int64
	Memo, Breaker            bool
	BlockedBy                *receiptLink
	Earlier                  []receiptLink
	Receipt                  *receiptView
	RunHref                  string
	// Problem is the first check of the node in its run that fails
	// (scheduler.VerifyNode): the record's claim about it does not hold.
	Problem string
	// Remembered and RememberedSince are receiptView's, for a node
	// without a receipt whose links the page verified.
	Remembered      int
	RememberedSince string
}

// nodePage shows a node of a run: its state in the record, and its
// latest receipt verified now.
func (s *Server) nodePage(w http.ResponseWriter, r *http.Request, st cas.Store) error {
	ctx := r.Context()
	run, node := r.PathValue("run"), r.PathValue("node")
	if scheduler.CheckRunID(run) != nil {
		return notFound("no run %q", run)
	}
	rec, root, err := scheduler.LoadRecord(ctx, st, run)
	if err != nil {
		return err
	}
	i, found := slices.BinarySearchFunc(rec.Nodes, node, func(n scheduler.NodeRecord, name string) int { return strings.Compare(n.Name, name) })
	if !found {
		if i = slices.IndexFunc(rec.Nodes, func(n scheduler.NodeRecord) bool { return n.Name == node }); i < 0 {
			return notFound("run %s has no node %q", run, node)
		}
	}
	n := rec.Nodes[i]
	d := nodeData{pageData: pageData{Title: "node " + node + " of " + run}, Run: run, Node: node, State: n.State, Reason: n.Reason,
		Attempts: n.Attempts, Memo: n.Memo, Breaker: n.Breaker, RunHref: "/runs/" + url.PathEscape(run)}
	// The receipts of a run's nodes link its packages: each tree is
	// walked once for the page, not once per receipt upstream. A Work
	// Order that cannot be read leaves every receipt to walk its own:
	// the verdicts do not need it.
	var known map[cid.Cid]bool
	opts := &scheduler.NodeOptions{Record: rec}
	if shape, err := s.shapes.shape(ctx, st, rec); err == nil {
		if known, err = packagesKnown(ctx, st, shape); err != nil {
			return err
		}
		// The Work Order as decoded for the shape, by its CID (what the
		// CID names cannot change), its blocks read back for the page
		// (one damaged since must fail the check "work order").
		opts.LoadWorkOrder = func(ctx context.Context, st cas.Store, r *scheduler.Record) (dag.Object, *dag.WorkOrder, error) {
			if r.WorkOrder.Cid != rec.WorkOrder.Cid {
				return scheduler.LoadWorkOrder(ctx, st, r)
			}
			if err := cas.ReadObjectBlocks(ctx, st, r.WorkOrder.Cid); err != nil {
				return dag.Object{}, nil, err
			}
			return shape.obj, shape.wo, nil
		}
	} else if ctx.Err() != nil {
		return ctx.Err()
	}
	vr, err := s.newVerifierKnown(ctx, st, known)
	if err != nil {
		return err
	}
	link := func(c cid.Cid) (receiptLink, error) {
		v, _, err := vr.verdict(ctx, c)
		return receiptLink{CID: c.String(), Verdict: v}, err
	}
	if n.BlockedBy != nil {
		l, err := link(n.BlockedBy.Cid)
		if err != nil {
			return err
		}
		d.BlockedBy = &l
	}
	for _, e := range n.Earlier {
		l, err := link(e.Cid)
		if err != nil {
			return err
		}
		d.Earlier = append(d.Earlier, l)
	}
	// The node in its run, as hg verify RUN checks it: a receipt that
	// verifies alone is this node's accepted work only if these hold.
	nv, err := scheduler.VerifyNode(ctx, st, root, node, vr.cv, opts)
	if err != nil {
		return err
	}
	var mine *scheduler.NodeVerification
	if len(nv.Nodes) == 1 {
		mine = &nv.Nodes[0]
	}
	if p := runProblem(nv); p != "" {
		d.Problem = p
	} else if mine != nil {
		for _, c := range mine.Checks {
			if !c.OK && c.Name != verify.CheckTrust {
				d.Problem = c.Name + ": " + c.Detail
				break
			}
		}
	}
	if n.Receipt != nil {
		if d.Receipt, err = s.receiptView(ctx, st, vr, n.Receipt.Cid); err != nil {
			return err
		}
		d.Receipt.Verdict = nodeVerdict(nv, mine, d.Receipt.Verdict)
		d.Receipt.Remembered, d.Receipt.RememberedSince = vr.remembered()
	} else {
		// The links of a node without a receipt (blocked by, earlier
		// attempts) may stand on remembered verdicts too.
		d.Remembered, d.RememberedSince = vr.remembered()
	}
	return s.render(w, "node", d)
}

type receiptData struct {
	pageData
	Receipt *receiptView
}

// receiptPage shows any receipt by its CID (an earlier attempt, an
// upstream receipt), verified now.
func (s *Server) receiptPage(w http.ResponseWriter, r *http.Request, st cas.Store) error {
	c, err := cas.ParseCID(r.PathValue("cid"))
	if err != nil {
		return badRequest("%q is not a CID", r.PathValue("cid"))
	}
	if ok, err := st.Has(r.Context(), c); err != nil {
		return err
	} else if !ok {
		return notFound("the store holds no %s", c)
	}
	vr, err := s.newVerifier(r.Context(), st)
	if err != nil {
		return err
	}
	rv, err := s.receiptView(r.Context(), st, vr, c)
	if err != nil {
		return err
	}
	rv.Remembered, rv.RememberedSince = vr.remembered()
	return s.render(w, "receipt", receiptData{pageData: pageData{Title: "receipt " + c.String()}, Receipt: rv})
}

// receiptView verifies receipt c now (with vr, the page's verifier) and
// reads its ledger for the page.
// A ledger that cannot be read is said so beside the verdict; it is never
// an error page, since the verdict is what the reader needs.
func (s *Server) receiptView(ctx context.Context, st cas.Store, vr *verifier, c cid.Cid) (*receiptView, error) {
	verdict, v, err := vr.verdict(ctx, c)
	if err != nil {
		return nil, err
	}
	rv := &receiptView{CID: c.String(), Verdict: verdict, Checks: v.Checks, Unread: vr.standing.unread}
	l, err := ledger.LoadLedger(ctx, st, c)
	if err != nil {
		rv.LedgerError = err.Error()
		return rv, nil
	}
	rc := l.Receipt
	rv.Haygent, rv.Objective, rv.Run = rc.Haygent, rc.Objective, rc.Run
	rv.Started, rv.Finished = rc.StartedAt, rc.FinishedAt
	rv.Package, rv.Input, rv.Permissions = rc.Package.Cid.String(), rc.Input.Cid.String(), rc.Permissions.Cid.String()
	if rc.Output != nil {
		rv.Output = rc.Output.Cid.String()
	}
	if rc.Workspace != nil {
		rv.Workspace = rc.Workspace.Cid.String()
	}
	if rc.FinalWorkspace != nil {
		rv.Final = rc.FinalWorkspace.Cid.String()
	}
	rv.Used, rv.Denied, rv.Limitations, rv.Replay = rc.Used, rc.Denied, rc.Limitations, rc.Replay
	rv.Repairs, rv.RepairBudget = rc.Repairs, rc.RepairBudget
	if v.Input != nil {
		for _, u := range v.Input.Upstream {
			uv, _, err := vr.verdict(ctx, u.Cid) // verified with the receipt, once
			if err != nil {
				return nil, err
			}
			rv.Upstream = append(rv.Upstream, receiptLink{CID: u.Cid.String(), Verdict: uv})
			rv.Verdict = builtOn(rv.Verdict, u.Cid, uv)
		}
	}
	for _, a := range rc.Artifacts {
		rv.Artifacts = append(rv.Artifacts, artifactView{Path: a.Path, File: a.File.Cid.String(), Digest: a.Digest})
	}
	if h := rc.Halt; h != nil {
		hv := &haltView{FailedGate: h.FailedGate, Verdict: h.Verdict, Reason: h.Reason, RestartPoint: h.RestartPoint, Attempts: h.Attempts}
		for _, e := range h.LastEvidence {
			hv.LastEvidence = append(hv.LastEvidence, e.Cid.String())
		}
		for _, a := range h.Preserved {
			hv.Preserved = append(hv.Preserved, artifactView{Path: a.Path, File: a.File.Cid.String(), Digest: a.Digest})
		}
		rv.Halt = hv
	}
	for _, t := range l.Transitions {
		tv := transitionView{Seq: t.Seq, Step: t.Step, Kind: t.Kind, Status: t.Status, Note: t.Note, Attempt: t.Attempt,
			Started: t.StartedAt, Finished: t.FinishedAt, Denied: t.Denied}
		for _, e := range t.Evidence {
			if ev := l.Evidence[e.Cid]; ev != nil {
				tv.Evidence = append(tv.Evidence, evidenceOf(e.Cid, ev))
			}
		}
		for _, sc := range t.SlotCalls {
			if call := l.SlotCalls[sc.Cid]; call != nil {
				tv.Slots = append(tv.Slots, slotOf(ctx, st, call))
			}
		}
		for _, g := range t.Gates {
			if gr := l.Gates[g.Cid]; gr != nil {
				tv.Gates = append(tv.Gates, gateView{Gate: gr.Gate, Predicate: gr.Predicate, Verdict: gr.Verdict, Action: gr.Action, Reason: gr.Reason, At: gr.At})
			}
		}
		rv.Transitions = append(rv.Transitions, tv)
	}
	for _, sl := range l.StepLogs() {
		lv := logView{Step: sl.Step, Attempt: sl.Attempt, Seq: sl.Seq, Code: sl.Code, TimedOut: sl.TimedOut, Argv: sl.Argv}
		lv.Streams = []streamView{streamOf(ctx, st, "stdout", sl.Stdout), streamOf(ctx, st, "stderr", sl.Stderr)}
		rv.Logs = append(rv.Logs, lv)
	}
	return rv, nil
}

// evidenceOf shows an evidence object: its data as key and value, each
// value in DAG-JSON (so a test report's failed case names and an exit's
// code read as stored).
func evidenceOf(c cid.Cid, ev *ledger.Evidence) evidenceView {
	e := evidenceView{CID: c.String(), Kind: ev.Kind, Subject: ev.Subject, ObservedAt: ev.ObservedAt,
		Establishes: ev.Coverage.Establishes, DoesNot: ev.Coverage.DoesNotEstablish}
	keys := make([]string, 0, len(ev.Data))
	for k := range ev.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		e.Data = append(e.Data, kv{K: k, V: jsonValue(ev.Data[k])})
	}
	return e
}

// jsonValue is v as DAG-JSON, cut at 4 KiB, or as Go prints it when it
// cannot be encoded.
func jsonValue(v any) string {
	var s string
	if j, err := cas.EncodeJSON(v); err == nil {
		s = string(j)
	} else {
		s = fmt.Sprint(v)
	}
	if len(s) > 4096 {
		s = s[:4096] + "…"
	}
	return s
}

func slotOf(ctx context.Context, st cas.Store, sc *ledger.SlotCall) slotView {
	v := slotView{Slot: sc.Slot, Adapter: sc.Adapter, Model: sc.Model, Verdict: sc.Verdict, Try: sc.Try, Errors: sc.Errors,
		ResponseCID: sc.Response.Cid.String()}
	data, err := st.Get(ctx, sc.Response.Cid)
	switch {
	case err != nil:
		v.Response = "(cannot be read: " + err.Error() + ")"
	case len(data) > maxInline:
		v.Response = string(data[:maxInline]) + "…"
	default:
		v.Response = string(data)
	}
	return v
}

// streamOf reads up to maxInline bytes of one output stream of a step.
func streamOf(ctx context.Context, st cas.Store, name string, ref ledger.LogRef) streamView {
	sv := streamView{Name: name, Truncated: ref.Truncated}
	if ref.Err != nil {
		sv.Error = ref.Err.Error()
		return sv
	}
	sv.CID = ref.CID.String()
	var buf bytes.Buffer
	_, err := ledger.ReadLog(ctx, st, ref.CID, &limitWriter{w: &buf, n: maxInline, cut: &sv.Cut})
	if err != nil && !errors.Is(err, errCut) {
		sv.Error = err.Error()
	}
	sv.Text = buf.String()
	return sv
}

// limitWriter takes n bytes and then fails with errCut.
type limitWriter struct {
	w   io.Writer
	n   int
	cut *bool
}

var errCut = errors.New("cut")

func (l *limitWriter) Write(p []byte) (int, error) {
	if len(p) > l.n {
		l.w.Write(p[:l.n])
		l.n = 0
		*l.cut = true
		return 0, errCut
	}
	l.n -= len(p)
	return l.w.Write(p)
}

package scheduler

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/perm"
	"github.com/haygent/hg/haygent/verify"
	"github.com/ipfs/go-cid"
)

// Names of the checks [VerifyRun] adds to those of [verify.VerifyReceipt].
const (
	CheckRecord     = "run record"
	CheckWorkOrder  = "work order"
	CheckOutcome    = "outcome"
	CheckAcceptance = "acceptance"
	CheckPlace      = "place in the run"
	CheckEvents     = "events"
	CheckEarlier    = "earlier attempts"
)

// VerifyOptions tune [VerifyRun]. A nil *VerifyOptions means none.
type VerifyOptions struct {
	// Progress, if set, is called as nodes are verified with how many
	// are done out of how many, from one goroutine at a time.
	Progress func(done, total int)

	// signaturesAhead, when not 0, replaces defaultSignaturesAhead (for
	// tests: export_test.go).
	signaturesAhead int
}

// RunVerification is the verification of a stored run: checks of the run
// as a whole, then one [NodeVerification] per node, in name order.
type RunVerification struct {
	Run    string
	Record cid.Cid
	Status string // the record's
	Checks []verify.Check
	Nodes  []NodeVerification
}

// NodeVerification is the verification of one node of a run: its state,
// and for a node with a receipt, the receipt's checks followed by the
// acceptance and the node's place in the run.
type NodeVerification struct {
	Node         string
	State        string
	Receipt      cid.Cid // undefined for a node that never returned one
	Checks       []verify.Check
	Transitions  int
	Blocks       int
	Verification *verify.Verification
}

// OK reports whether every check of the run and of every node passed.
func (v *RunVerification) OK() bool {
	node, c := v.FirstFailure()
	return node == "" && c == nil && len(v.Checks) > 0
}

// FirstFailure returns the first failed check, run checks first, and the
// node it belongs to ("" for the run).
func (v *RunVerification) FirstFailure() (node string, c *verify.Check) {
	for i := range v.Checks {
		if !v.Checks[i].OK {
			return "", &v.Checks[i]
		}
	}
	for _, n := range v.Nodes {
		for i := range n.Checks {
			if !n.Checks[i].OK {
				return n.Node, &n.Checks[i]
			}
		}
	}
	return "", nil
}

// Transitions is the number of transitions read from every node's chain.
func (v *RunVerification) Transitions() int {
	t := 0
	for _, n := range v.Nodes {
		t += n.Transitions
	}
	return t
}

// VerifyRun verifies the run record at c from st alone, independently of
// the scheduler that wrote it: any machine holding the blocks (a bundle)
// can. Besides every receipt's own checks ([verify.VerifyReceipt], with
// "upstream receipts" for receipts made from upstream ones), it checks:
//
//   - "run record": the hg/run@1 root and its pages decode strictly, hold
//     the nodes in name order and as many as the root says.
//   - "work order": the stored hg/workorder@1 decodes and names exactly the
//     record's nodes.
//   - "outcome": the record's status agrees with its nodes: done only when
//     every required node and everything it needs is done.
//   - per node with a receipt, "acceptance": the hg/acceptance@1 links that
//     receipt with the verdict "accepted" and its status, and a done node
//     has one; a done node's receipt is a PASS.
//   - per node, "place in the run": a done node's receipt ran the node's
//     package on the node's input as the Work Order builds it from the
//     upstream receipts' outputs, with those upstream receipts recorded,
//     and on the workspace the Work Order gives it: its workspace snapshot
//     is what the package's read grants (its permissions.json) let it see
//     of the tree the Work Order names, or of the final workspace the
//     receipt of the upstream node it names records, rebuilt here from
//     the stored trees; the empty tree for a node given none. A receipt
//     the run made itself (not a memo hit) names this run and node.
//   - per node with earlier attempts, "earlier attempts": each is a
//     receipt that ran the node's package (one of another run is a memo
//     hit a regression or a retry took back; only its package ties it to
//     the node).
//
// Nodes are verified on every core; each receipt is verified once however
// many receipts name it. err is only for the store or ctx.
func VerifyRun(ctx context.Context, st cas.Store, c cid.Cid, trusted []ed25519.PublicKey, opts *VerifyOptions) (*RunVerification, error) {
	if opts == nil {
		opts = &VerifyOptions{}
	}
	v := &RunVerification{Record: c}
	rec, err := LoadRecordAt(ctx, st, c)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		v.Checks = append(v.Checks, verify.Check{Name: CheckRecord, Detail: err.Error()})
		return v, nil
	}
	v.Run, v.Status = rec.Run, rec.Status
	v.Checks = append(v.Checks, verify.Check{Name: CheckRecord, OK: true,
		Detail: fmt.Sprintf("run %s: %d nodes, status %s", rec.Run, len(rec.Nodes), rec.Status)})

	// The receipts' signatures are checked in batches from now on, on
	// every core, while the Work Order loads (about a tenth of the
	// verification of a large run, and serial): each node's own check of
	// its signature then finds it known.
	cache := verify.NewCache()
	sigCtx, stopSigs := context.WithCancel(ctx)
	defer stopSigs()
	sigs := precheckSignatures(sigCtx, st, cache.Signatures(), rec, opts.signaturesAhead)

	wo, events, packages, known, err := loadRunParts(ctx, st, rec, v, true, nil)
	if err != nil {
		return nil, err
	}
	if wo == nil {
		return v, nil
	}
	cv := verify.NewChainVerifier(st, trusted, known, cache)
	perms := &permCache{st: st}
	v.Nodes = make([]NodeVerification, len(rec.Nodes))
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	var progressMu sync.Mutex
	var next atomic.Int64
	done := 0
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= len(sigs.done) || ctx.Err() != nil {
					return
				}
				select {
				case <-sigs.done[k]:
				case <-ctx.Done():
					return
				}
				for i := k * signatureBatch; i < min((k+1)*signatureBatch, len(rec.Nodes)); i++ {
					if err := verifyNode(ctx, st, cv, perms, rec, wo, packages, events, i, &v.Nodes[i]); err != nil {
						select {
						case errs <- err:
						default:
						}
					}
					if opts.Progress != nil {
						progressMu.Lock()
						done++
						opts.Progress(done, len(rec.Nodes))
						progressMu.Unlock()
					}
				}
				select {
				case <-sigs.ahead:
				case <-ctx.Done():
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return v, nil
}

// loadRunParts loads what verifying the run's nodes needs besides the
// record: its Work Order (checked to name the record's nodes), its events
// by node, each node's package and which package trees walk whole (each
// walked once, not once per receipt; one that is damaged is left to every
// receipt's own walk, which names it; only when walk is set). The
// run-level checks it makes
// (work order, outcome, events) are added to v; a nil Work Order with a
// nil error means the run failed one that leaves nothing to verify.
func loadRunParts(ctx context.Context, st cas.Store, rec *Record, v *RunVerification, walk bool, load WorkOrderLoader) (wo *dag.WorkOrder, events map[string][]RunEvent, packages map[string]cid.Cid, known map[cid.Cid]bool, err error) {
	if load == nil {
		load = LoadWorkOrder
	}
	obj, wo, err := load(ctx, st, rec)
	if err == nil {
		err = sameNodes(rec, wo)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, nil, nil, ctx.Err()
		}
		v.Checks = append(v.Checks, verify.Check{Name: CheckWorkOrder, Detail: fmt.Sprintf("%s: %v", rec.WorkOrder.Cid, err)})
		return nil, nil, nil, nil, nil
	}
	v.Checks = append(v.Checks, verify.Check{Name: CheckWorkOrder, OK: true, Detail: fmt.Sprintf("%s names the %d nodes", rec.WorkOrder.Cid, len(rec.Nodes))})
	v.Checks = append(v.Checks, outcomeCheck(rec, wo))
	if len(rec.Events) > 0 {
		var c verify.Check
		events, c = eventsByNode(rec)
		v.Checks = append(v.Checks, c)
	}
	known = map[cid.Cid]bool{}
	packages = make(map[string]cid.Cid, len(obj.Nodes))
	for _, on := range obj.Nodes {
		pkg := on.Haygent.Cid
		packages[on.Name] = pkg
		if _, seen := known[pkg]; seen || !walk {
			continue
		}
		err := cas.Walk(ctx, st, []cid.Cid{pkg}, nil, func(cid.Cid, []byte) error { return nil })
		if err != nil && ctx.Err() != nil {
			return nil, nil, nil, nil, ctx.Err()
		}
		known[pkg] = err == nil
	}
	return wo, events, packages, known, nil
}

// NodeOptions are what a caller of [VerifyNode] has read already.
type NodeOptions struct {
	// Record is the run record at the CID VerifyNode is given, as
	// [LoadRecordAt] reads it (nil: read it).
	Record *Record
	// LoadWorkOrder reads the record's Work Order as [LoadWorkOrder]
	// does, from what the caller keeps by the Work Order's CID (nil:
	// LoadWorkOrder). Neither it nor the caller may change what it
	// returns.
	LoadWorkOrder WorkOrderLoader
}

// WorkOrderLoader reads the Work Order a run record names: [LoadWorkOrder]
// or what gives the same answer for the same CID.
type WorkOrderLoader func(ctx context.Context, st cas.Store, rec *Record) (dag.Object, *dag.WorkOrder, error)

// VerifyNode verifies one node of the run whose record is at c as
// [VerifyRun] verifies each node (its receipt with every receipt upstream
// of it, its acceptance, its place in the run, its events and earlier
// attempts), with the run-level checks (record, work order, outcome,
// events), and no other node: a page about one node of a large run
// pays for that node's chain, not the run's. The result's Nodes holds
// the node alone; none when the run-level checks leave nothing to verify
// or the run has no such node (a failed check "run record" says so).
// Receipts are verified by cv, the caller's (its trusted keys, its
// cache): a page that shows the node's receipt verifies it once. opts
// may be nil.
func VerifyNode(ctx context.Context, st cas.Store, c cid.Cid, node string, cv *verify.ChainVerifier, opts *NodeOptions) (*RunVerification, error) {
	if opts == nil {
		opts = &NodeOptions{}
	}
	v := &RunVerification{Record: c}
	rec := opts.Record
	if rec == nil {
		var err error
		if rec, err = LoadRecordAt(ctx, st, c); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			v.Checks = append(v.Checks, verify.Check{Name: CheckRecord, Detail: err.Error()})
			return v, nil
		}
	}
	v.Run, v.Status = rec.Run, rec.Status
	i := slices.IndexFunc(rec.Nodes, func(n NodeRecord) bool { return n.Name == node })
	if i < 0 {
		v.Checks = append(v.Checks, verify.Check{Name: CheckRecord, Detail: fmt.Sprintf("run %s has no node %q", rec.Run, node)})
		return v, nil
	}
	v.Checks = append(v.Checks, verify.Check{Name: CheckRecord, OK: true,
		Detail: fmt.Sprintf("run %s: %d nodes, status %s", rec.Run, len(rec.Nodes), rec.Status)})
	// The caller's cv knows which package trees it walked.
	wo, events, packages, _, err := loadRunParts(ctx, st, rec, v, false, opts.LoadWorkOrder)
	if err != nil {
		return nil, err
	}
	if wo == nil {
		return v, nil
	}
	v.Nodes = make([]NodeVerification, 1)
	if err := verifyNode(ctx, st, cv, &permCache{st: st}, rec, wo, packages, events, i, &v.Nodes[0]); err != nil {
		return nil, err
	}
	return v, nil
}

// signatureBatch is how many receipts' signatures are checked at once,
// and how many nodes a worker verifies at a time: past a few dozen the
// batch saves little more per signature, and the last chunk keeps one
// core busy while the other waits.
const signatureBatch = 64

// defaultSignaturesAhead bounds how many batches the signature checks run
// ahead of the nodes' verification: what they find is kept in a cache of
// 16,384 signatures, which must still hold a batch when its nodes come.
const defaultSignaturesAhead = 32

// signatureChecks is the progress of the batch checks of a run's
// signatures: done[k] is closed once batch k is checked (or ctx is done),
// and the verification of batch k's nodes takes one token from ahead
// when it ends, letting the checks start one batch more.
type signatureChecks struct {
	done  []chan struct{}
	ahead chan struct{}
}

// precheckSignatures starts checking the signatures of the record's
// receipts in batches of signatureBatch nodes, on every core. Whether a
// batch holds is not reported: it only spares each receipt's own check
// (see [ledger.Signatures.PrecheckReceipts]).
func precheckSignatures(ctx context.Context, st cas.Store, sigs *ledger.Signatures, rec *Record, ahead int) *signatureChecks {
	if ahead <= 0 {
		ahead = defaultSignaturesAhead
	}
	s := &signatureChecks{
		done:  make([]chan struct{}, (len(rec.Nodes)+signatureBatch-1)/signatureBatch),
		ahead: make(chan struct{}, ahead),
	}
	for k := range s.done {
		s.done[k] = make(chan struct{})
	}
	var next atomic.Int64
	for range runtime.GOMAXPROCS(0) {
		go func() {
			var receipts []cid.Cid
			for {
				k := int(next.Add(1) - 1)
				if k >= len(s.done) {
					return
				}
				select {
				case s.ahead <- struct{}{}:
				case <-ctx.Done():
				}
				receipts = receipts[:0]
				for _, n := range rec.Nodes[k*signatureBatch : min((k+1)*signatureBatch, len(rec.Nodes))] {
					if n.Receipt != nil {
						receipts = append(receipts, n.Receipt.Cid)
					}
				}
				if ctx.Err() == nil {
					sigs.PrecheckReceipts(ctx, st, receipts)
				}
				close(s.done[k])
			}
		}()
	}
	return s
}

// sameNodes checks that the record and the Work Order name the same nodes.
func sameNodes(rec *Record, wo *dag.WorkOrder) error {
	if len(rec.Nodes) != len(wo.Nodes) {
		return fmt.Errorf("the record has %d nodes, the work order %d", len(rec.Nodes), len(wo.Nodes))
	}
	for _, n := range rec.Nodes {
		if wo.Nodes[n.Name] == nil {
			return fmt.Errorf("the record's node %q is not in the work order", n.Name)
		}
	}
	return nil
}

// outcomeCheck recomputes the run's outcome from its nodes' states.
func outcomeCheck(rec *Record, wo *dag.WorkOrder) verify.Check {
	stuck := stuckNodes(rec.Nodes, wo)
	switch {
	case rec.Status == StatusDone && len(stuck) > 0:
		return verify.Check{Name: CheckOutcome, Detail: "the record says done, but not done: " + summarize(stuck)}
	case rec.Status == StatusDone:
		return verify.Check{Name: CheckOutcome, OK: true, Detail: fmt.Sprintf("done: the %d required nodes and all they need are done", len(wo.Required()))}
	case len(stuck) == 0 && rec.Status != StatusRunning:
		return verify.Check{Name: CheckOutcome, Detail: fmt.Sprintf("the record says %s, but every required node is done", rec.Status)}
	}
	return verify.Check{Name: CheckOutcome, OK: true, Detail: fmt.Sprintf("%s: not done: %s", rec.Status, summarize(stuck))}
}

func summarize(list []string) string {
	if len(list) > 6 {
		return strings.Join(list[:6], ", ") + fmt.Sprintf(" and %d more", len(list)-6)
	}
	return strings.Join(list, ", ")
}

// verifyNode fills out the verification of node i of the record.
func verifyNode(ctx context.Context, st cas.Store, cv *verify.ChainVerifier, perms *permCache, rec *Record, wo *dag.WorkOrder, packages map[string]cid.Cid, events map[string][]RunEvent, i int, out *NodeVerification) error {
	n := rec.Nodes[i]
	out.Node, out.State = n.Name, n.State
	// A node that events moved, or that only an event can have moved,
	// is checked against them: a regressed receipt is not done work.
	if evs := events[n.Name]; len(evs) > 0 || n.State == dag.Rewritten || n.State == dag.Deleted || n.Breaker {
		c, err := nodeEventsCheck(ctx, cv, n, evs)
		if err != nil {
			return err
		}
		out.Checks = append(out.Checks, c)
	}
	if len(n.Earlier) > 0 {
		c, err := earlierCheck(ctx, st, packages[n.Name], n)
		if err != nil {
			return err
		}
		out.Checks = append(out.Checks, c)
	}
	if n.Receipt == nil {
		if n.State == dag.Done {
			out.Checks = append(out.Checks, verify.Check{Name: CheckAcceptance, Detail: "the node is done but records no receipt"})
		}
		return nil
	}
	out.Receipt = n.Receipt.Cid
	rv, err := cv.Verify(ctx, n.Receipt.Cid)
	if err != nil {
		return err
	}
	out.Verification = rv
	out.Checks = append(out.Checks, rv.Checks...)
	out.Transitions, out.Blocks = rv.Transitions, rv.Blocks
	place, err := placeCheck(ctx, st, cv, perms, rec, wo, packages, n, rv)
	if err != nil {
		return err
	}
	out.Checks = append(out.Checks, acceptanceCheck(ctx, st, n, rv), place)
	return ctx.Err()
}

// acceptanceCheck checks the node's acceptance against its receipt.
func acceptanceCheck(ctx context.Context, st cas.Store, n NodeRecord, rv *verify.Verification) verify.Check {
	c := verify.Check{Name: CheckAcceptance}
	if n.Acceptance == nil {
		if n.State == dag.Done {
			c.Detail = "the node is done but records no acceptance"
			return c
		}
		c.OK, c.Detail = true, "none: the node is "+n.State
		return c
	}
	var acc Acceptance
	if err := st.View(ctx, n.Acceptance.Cid, func(d []byte) error { return cas.Unmarshal(d, &acc) }); err != nil {
		c.Detail = fmt.Sprintf("%s: %v", n.Acceptance.Cid, err)
		return c
	}
	switch {
	case acc.Type != TypeAcceptance:
		c.Detail = fmt.Sprintf("%s is a %q, not an acceptance", n.Acceptance.Cid, acc.Type)
	case acc.Receipt.Cid != n.Receipt.Cid:
		c.Detail = fmt.Sprintf("%s accepts receipt %s, not the node's %s", n.Acceptance.Cid, acc.Receipt.Cid, n.Receipt.Cid)
	case n.State == dag.Done && acc.Verdict != Accepted:
		c.Detail = fmt.Sprintf("the node is done but its acceptance says %q", acc.Verdict)
	case acc.Status != rv.Status:
		c.Detail = fmt.Sprintf("the acceptance records status %s, the receipt says %s", acc.Status, rv.Status)
	case n.State == dag.Done && rv.Status != ledger.StatusPass:
		c.Detail = "the node is done but its receipt is a " + rv.Status
	default:
		c.OK, c.Detail = true, fmt.Sprintf("%s %s by %s", acc.Verdict, n.Acceptance.Cid, acc.Verifier)
	}
	return c
}

// earlierCheck checks that each earlier attempt of node n is a receipt
// of the node's package pkg. err is only for ctx.
func earlierCheck(ctx context.Context, st cas.Store, pkg cid.Cid, n NodeRecord) (verify.Check, error) {
	c := verify.Check{Name: CheckEarlier}
	for _, e := range n.Earlier {
		r, err := ledger.LoadReceipt(ctx, st, e.Cid)
		switch {
		case ctx.Err() != nil:
			return c, ctx.Err()
		case err != nil:
			c.Detail = fmt.Sprintf("earlier attempt %s: %v", e.Cid, err)
			return c, nil
		case r.Package.Cid != pkg:
			c.Detail = fmt.Sprintf("earlier attempt %s ran package %s, the work order names %s", e.Cid, r.Package.Cid, pkg)
			return c, nil
		}
	}
	c.OK, c.Detail = true, fmt.Sprintf("%s, each of package %s", plural(len(n.Earlier), "earlier attempt"), pkg)
	return c, nil
}

// placeCheck checks that a done node's receipt is the node's work in this
// run: its package, its input as the Work Order builds it from the
// upstream receipts' outputs, those upstream receipts, its workspace as
// the Work Order gives it, and, unless it is a memo hit, this run and
// node.
func placeCheck(ctx context.Context, st cas.Store, cv *verify.ChainVerifier, perms *permCache, rec *Record, wo *dag.WorkOrder, packages map[string]cid.Cid, n NodeRecord, rv *verify.Verification) (verify.Check, error) {
	c := verify.Check{Name: CheckPlace}
	if n.State != dag.Done {
		c.OK, c.Detail = true, "not checked: the node is "+n.State
		return c, nil
	}
	w, err := placeWork(ctx, st, cv, perms, rec, wo, packages[n.Name], n)
	if err != nil {
		return c, err
	}
	if c.Detail = sameWork(rv, w, &placeWords); c.Detail != "" {
		return c, nil
	}
	c.OK, c.Detail = true, fmt.Sprintf("package and input of node %s, built from %d upstream receipts", n.Name, len(wo.Upstream(n.Name)))
	if w.workspace != emptyWorkspace {
		c.Detail += ", on workspace " + w.workspace.String()
	}
	return c, nil
}

// placeWork rebuilds a done node's work from the stored run: package pkg,
// its input built from the outputs of the upstream receipts the record
// holds, and its workspace as the Work Order gives it. A memo hit's
// receipt may be of another run, on other upstream receipts. err is only
// for ctx.
func placeWork(ctx context.Context, st cas.Store, cv *verify.ChainVerifier, perms *permCache, rec *Record, wo *dag.WorkOrder, pkg cid.Cid, n NodeRecord) (*work, error) {
	w := &work{pkg: pkg, anyUpstream: n.Memo}
	if !n.Memo {
		w.run = NodeRunID(rec.Run, n.Name)
	}
	// The upstream receipts the input was built from, and the outputs
	// they hand on.
	needs := wo.Upstream(n.Name)
	outputs := map[string]any{}
	for _, up := range needs {
		u := rec.node(up)
		if u == nil || u.State != dag.Done || u.Receipt == nil {
			w.why = fmt.Sprintf("it needs %s, which is not done", up)
			return w, nil
		}
		w.upstream = append(w.upstream, u.Receipt.Cid)
	}
	// With a memo hit the upstream receipts may be an earlier run's: the
	// input must still be what this run's upstream outputs make.
	for _, up := range needs {
		uv, err := cv.Verify(ctx, rec.node(up).Receipt.Cid)
		if err != nil {
			return nil, err
		}
		if uv == nil || uv.Output == nil {
			w.why = fmt.Sprintf("the output of %s cannot be read", up)
			return w, nil
		}
		outputs[up] = uv.Output.Payload
	}
	input, err := wo.Nodes[n.Name].Resolve(func(from, pointer string) (any, error) {
		return dag.Lookup(outputs[from], pointer)
	})
	if err != nil {
		w.why = fmt.Sprintf("its input cannot be built from the upstream outputs: %v", err)
		return w, nil
	}
	if enc, err := cas.EncodeNode(cas.FromJSON(input)); err == nil {
		w.payload = cas.Sum(cas.DagCBOR, enc)
	} // else no receipt's input is it
	w.workspace, w.why, err = expectedWorkspace(ctx, st, cv, perms, rec, wo.Nodes[n.Name].Workspace, pkg)
	return w, err
}

// expectedWorkspace rebuilds the workspace snapshot a node's receipt must
// hold: the empty tree for a node given none, else what the package's
// read grants let it see of the tree the Work Order gives it, or of the
// final workspace its upstream node's receipt records. why says what
// cannot be rebuilt; err is only for ctx.
func expectedWorkspace(ctx context.Context, st cas.Store, cv *verify.ChainVerifier, perms *permCache, rec *Record, ws *dag.Workspace, pkg cid.Cid) (want cid.Cid, why string, err error) {
	var given cid.Cid
	switch {
	case ws == nil:
		return emptyWorkspace, "", nil
	case ws.From != "":
		u := rec.node(ws.From)
		if u == nil || u.State != dag.Done || u.Receipt == nil {
			return cid.Undef, fmt.Sprintf("it works on the final workspace of %s, which is not done", ws.From), nil
		}
		uv, err := cv.Verify(ctx, u.Receipt.Cid)
		if err != nil {
			return cid.Undef, "", err
		}
		if uv == nil || uv.Object == nil || uv.Object.FinalWorkspace == nil {
			return cid.Undef, fmt.Sprintf("it works on the final workspace of %s, whose receipt records none", ws.From), nil
		}
		given = uv.Object.FinalWorkspace.Cid
	default:
		given = ws.Tree
	}
	set, why := perms.get(ctx, pkg)
	if why != "" {
		return cid.Undef, why, ctx.Err()
	}
	want, err = WorkspaceView(ctx, blockReader(ctx, nil, st), given, set)
	if err != nil {
		if ctx.Err() != nil {
			return cid.Undef, "", ctx.Err()
		}
		return cid.Undef, fmt.Sprintf("its workspace %s cannot be read: %v", given, err), nil
	}
	return want, "", nil
}

// permCache reads the permissions of package trees, each once.
type permCache struct {
	st cas.Store
	mu sync.Mutex
	m  map[cid.Cid]permEntry
}

type permEntry struct {
	set *perm.Set
	why string
}

// get returns the permissions the package tree pkg declares, or why they
// cannot be read.
func (p *permCache) get(ctx context.Context, pkg cid.Cid) (*perm.Set, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.m[pkg]; ok {
		return e.set, e.why
	}
	var e permEntry
	data, err := readTreeFile(ctx, p.st, pkg, haygent.PermissionsFile)
	if err == nil {
		e.set, err = perm.Parse(data)
	}
	if err != nil {
		e.why = fmt.Sprintf("the permissions of package %s cannot be read: %v", pkg, err)
	}
	if ctx.Err() != nil {
		return nil, e.why // not remembered
	}
	if p.m == nil {
		p.m = map[cid.Cid]permEntry{}
	}
	p.m[pkg] = e
	return e.set, e.why
}

// readTreeFile reads the file name at the top of the tree c, up to the
// block limit.
func readTreeFile(ctx context.Context, st cas.Store, c cid.Cid, name string) ([]byte, error) {
	t, err := cas.LoadTree(ctx, st, c)
	if err != nil {
		return nil, err
	}
	for _, e := range t.Entries {
		if e.Name != name {
			continue
		}
		if e.Kind != cas.KindFile || e.Size > cas.MaxBlockSize {
			return nil, fmt.Errorf("%s is not a file of at most %d bytes", name, cas.MaxBlockSize)
		}
		var buf bytes.Buffer
		if _, err := cas.ReadFile(ctx, st, e.Link.Cid, &buf, nil); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	return nil, fmt.Errorf("no %s", name)
}

// eventsByNode groups the record's events by node, and checks that each
// is of a known kind and names a node of the run.
func eventsByNode(rec *Record) (map[string][]RunEvent, verify.Check) {
	c := verify.Check{Name: CheckEvents}
	byNode := map[string][]RunEvent{}
	for i, ev := range rec.Events {
		switch ev.Kind {
		case EventBreakerOpen, EventBreakerReset, EventRegressed, EventRewritten, EventDeleted:
		default:
			c.Detail = fmt.Sprintf("event #%d is of an unknown kind %q", i, ev.Kind)
			return byNode, c
		}
		if rec.node(ev.Node) == nil {
			c.Detail = fmt.Sprintf("event #%d (%s) names node %q, which the run does not have", i, ev.Kind, ev.Node)
			return byNode, c
		}
		byNode[ev.Node] = append(byNode[ev.Node], ev)
	}
	c.OK, c.Detail = true, fmt.Sprintf("%s of %s", plural(len(rec.Events), "event"), plural(len(byNode), "node"))
	return byNode, c
}

// heldBy reports whether receipt is the node's receipt or one of its
// earlier attempts: the receipts the record says the node held.
func heldBy(n NodeRecord, receipt cid.Cid) bool {
	if n.Receipt != nil && n.Receipt.Cid == receipt {
		return true
	}
	for _, e := range n.Earlier {
		if e.Cid == receipt {
			return true
		}
	}
	return false
}

// nodeEventsCheck checks a node's state against the events that moved
// it, oldest first: each event makes a move its kind allows; nothing
// follows a deletion, and only a deletion a rewrite; a regression names a
// receipt the node held; a node rewritten or deleted has the event that
// made it so, naming its state; a node whose breaker is open is blocked;
// a done node's receipt is not one a regression took back; and the later receipt a rewrite names verifies
// now, a PASS.
func nodeEventsCheck(ctx context.Context, cv *verify.ChainVerifier, n NodeRecord, evs []RunEvent) (verify.Check, error) {
	c := verify.Check{Name: CheckEvents}
	var last *RunEvent // the last rewrite or deletion
	var note string
	for i := range evs {
		ev := &evs[i]
		if last != nil && (last.Kind == EventDeleted || ev.Kind != EventDeleted) {
			c.Detail = fmt.Sprintf("a %s event follows the node's %s at %s", ev.Kind, last.Kind, last.At)
			return c, nil
		}
		ok := true
		switch ev.Kind {
		case EventRegressed:
			ok = ev.From == dag.Done && ev.To == dag.Failed && ev.Receipt != nil
		case EventRewritten:
			ok = ev.To == dag.Rewritten && dag.CanReopen(ev.From, ev.To) && ev.By != nil
		case EventDeleted:
			ok = ev.To == dag.Deleted && dag.CanReopen(ev.From, ev.To)
		case EventBreakerOpen:
			ok = ev.To == dag.Blocked
		}
		if !ok {
			c.Detail = fmt.Sprintf("a %s event moves the node from %s to %s", ev.Kind, ev.From, ev.To)
			return c, nil
		}
		switch ev.Kind {
		case EventRewritten, EventDeleted:
			last = ev
		case EventRegressed:
			if !heldBy(n, ev.Receipt.Cid) {
				c.Detail = fmt.Sprintf("a regressed event at %s names receipt %s, which the node never held", ev.At, ev.Receipt.Cid)
				return c, nil
			}
			if n.State == dag.Done && n.Receipt != nil && n.Receipt.Cid == ev.Receipt.Cid {
				c.Detail = fmt.Sprintf("the node is done with receipt %s, which regressed at %s: %s: %s", n.Receipt.Cid, ev.At, ev.Check, ev.Reason)
				return c, nil
			}
		}
		note = fmt.Sprintf("%s at %s by %s", ev.Kind, ev.At, ev.Who)
	}
	switch {
	case (n.State == dag.Rewritten || n.State == dag.Deleted) && (last == nil || last.To != n.State):
		c.Detail = fmt.Sprintf("the node is %s, but no event made it so", n.State)
		return c, nil
	case last != nil && last.To != n.State:
		c.Detail = fmt.Sprintf("the node is %s, but a %s event at %s made it %s", n.State, last.Kind, last.At, last.To)
		return c, nil
	case n.Breaker && n.State != dag.Blocked:
		c.Detail = fmt.Sprintf("the node's breaker is open, but it is %s", n.State)
		return c, nil
	}
	if last != nil && last.Kind == EventRewritten {
		v, err := cv.Verify(ctx, last.By.Cid)
		if err != nil {
			return c, err
		}
		switch f := v.FirstFailure(); {
		case f != nil:
			c.Detail = fmt.Sprintf("the later receipt %s (%s) that rewrote it does not verify: %s: %s", last.By.Cid, last.ByNode, f.Name, f.Detail)
			return c, nil
		case v.Status != ledger.StatusPass:
			c.Detail = fmt.Sprintf("the later receipt %s (%s) that rewrote it is a %s", last.By.Cid, last.ByNode, v.Status)
			return c, nil
		}
	}
	c.OK, c.Detail = true, "no events"
	if note != "" {
		c.Detail = fmt.Sprintf("%s, the last %s", plural(len(evs), "event"), note)
	}
	return c, nil
}

// plural writes n things, in the singular for one.
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

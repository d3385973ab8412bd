package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/ipfs/go-cid"
)

// Execute runs (or resumes) the run until its outcome is settled: every
// node done, failed, blocked or cancelled. Nodes already done are never
// run again; nodes that were active when an earlier process died run
// again. It returns the final record.
func (s *Scheduler) Execute(ctx context.Context, plan *Plan, run string) (*Record, error) {
	st, err := s.opts.Store.Open(ctx, true)
	if err != nil {
		return nil, err
	}
	rec, _, err := LoadRecord(ctx, st, run)
	var obj dag.Object
	if err == nil {
		obj, _, err = LoadWorkOrder(ctx, st, rec)
	}
	st.Close()
	if err != nil {
		return nil, err
	}
	// Each node runs the package the stored Work Order names, or not at
	// all: a package directory edited since Start hashes to another tree.
	packages := make(map[string]cid.Cid, len(obj.Nodes))
	var workspaces map[string]*dag.ObjectWorkspace // as the stored Work Order names them
	for _, n := range obj.Nodes {
		packages[n.Name] = n.Haygent.Cid
		if n.Workspace != nil {
			if workspaces == nil {
				workspaces = map[string]*dag.ObjectWorkspace{}
			}
			workspaces[n.Name] = n.Workspace
		}
	}
	for i := range rec.Nodes {
		switch rec.Nodes[i].State {
		case dag.Active, dag.Ready, dag.Concluded:
			rec.Nodes[i].State = dag.Pending // died mid-node: run it again
		}
	}
	// The keys this process trusts join those of the processes before.
	rec.Trusted = trustedKeys(rec.Trusted, s.opts.Trusted)
	var tripped []*NodeRecord // breakers the retry opened
	for i := range rec.Nodes {
		n := &rec.Nodes[i]
		switch {
		case n.State == dag.Cancelled:
			n.State, n.Reason = dag.Pending, ""
		case s.opts.Retry && n.State == dag.Failed && breakerDue(n, plan.MaxAttempts(n.Name)):
			// The circuit breaker counts every start of the node, in
			// every process that executed the run: past its limit,
			// only hg breaker reset lets it run again.
			openBreaker(rec, n, plan.MaxAttempts(n.Name), s.actor(), s.stamp())
			tripped = append(tripped, n)
		case s.opts.Retry && n.State == dag.Failed:
			if n.Receipt != nil {
				n.Earlier = append(n.Earlier, *n.Receipt)
			}
			n.State, n.Reason, n.Receipt, n.Acceptance, n.Memo = dag.Pending, "", nil, nil, false
		case s.opts.Retry && n.State == dag.Blocked && !n.Breaker:
			// A node blocked below a regression keeps its receipt until
			// it runs again: it may stay blocked.
			n.State, n.Reason, n.BlockedBy = dag.Pending, "", nil
		}
	}
	// Receipts a re-measurement took back are never reused from the memo
	// cache by this run.
	var regressed map[cid.Cid]bool
	for _, ev := range rec.Events {
		if ev.Kind == EventRegressed && ev.Receipt != nil {
			if regressed == nil {
				regressed = map[cid.Cid]bool{}
			}
			regressed[ev.Receipt.Cid] = true
		}
	}
	rec.Status = StatusRunning
	// Resuming is a decision to go on: it withdraws an earlier cancel. A
	// request it cannot withdraw would stop the run at its first poll.
	wst, err := s.opts.Store.Open(ctx, false)
	if err != nil {
		return nil, err
	}
	err = wst.DeleteRef(ctx, CancelNamespace, run)
	wst.Close()
	if err != nil && !errors.Is(err, cas.ErrNotFound) {
		return nil, fmt.Errorf("withdraw the cancel request of %s: %w", run, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e := &execution{s: s, plan: plan, rec: rec, packages: packages, workspaces: workspaces, outputs: map[string]map[string]any{}, cancel: cancel, regressed: regressed}
	for _, n := range tripped {
		e.emit(n)
	}
	rec, err = e.run(ctx)
	if executed != nil {
		executed(e)
	}
	return rec, err
}

// executed, when set (by tests), is given each execution once it ends.
var executed func(*execution)

// execution is one Execute in progress.
type execution struct {
	s    *Scheduler
	plan *Plan

	packages  map[string]cid.Cid // the package tree of each node, as the stored Work Order names it
	regressed map[cid.Cid]bool   // receipts a regression event of the run took back
	// workspaces is each node's workspace as the stored Work Order names
	// it (nil for a run where no node has one).
	workspaces map[string]*dag.ObjectWorkspace

	mu  sync.Mutex
	rec *Record
	// outputs holds the accepted output documents of done nodes that
	// some node yet to start reads its input from; consumers counts those
	// readers, by node. A document is dropped once its last reader has
	// built its input: on a run of 100,000 nodes, keeping all of them
	// made the collector mark 100 MB more at each cycle.
	outputs   map[string]map[string]any
	consumers map[string]int
	// trees holds the final workspaces of done nodes that some node yet
	// to start works on; wsReaders counts those nodes, by node. A tree is
	// dropped once its last reader has started, as outputs are.
	trees     map[string]*wsTree
	wsReaders map[string]int
	cancel    context.CancelFunc

	storedMu sync.Mutex
	stored   map[cid.Cid]*wsTree // the trees the Work Order names, read once

	pkgMu    sync.Mutex
	pkgCache map[string]pkgBlocks // by package directory

	memoRun    map[string]memoHit  // accepted in this run, not yet written out
	memoIndex  map[string]cid.Cid  // the store's memo entries: those when the run started and those it wrote since
	pages      *pageCache          // the stored pages of the record
	queue      []string            // pending nodes whose needs are all done
	waiting    map[string]int      // needs not yet done, by node
	dependents map[string][]string // direct dependents, by node
}

// pkgBlocks is a package stored once and handed to every node's staging
// store.
type pkgBlocks struct {
	root   cid.Cid
	blocks []cas.Block
	index  map[cid.Cid]cas.Block // blocks by CID: the base of staging stores
}

// packageBlocks returns the blocks of a package tree, stored once per
// execution.
func (e *execution) packageBlocks(ctx context.Context, pkg *haygent.Package) (pkgBlocks, error) {
	e.pkgMu.Lock()
	defer e.pkgMu.Unlock()
	if pb, ok := e.pkgCache[pkg.Dir]; ok {
		return pb, nil
	}
	stg := newStaging(nil)
	c, err := haygent.PutPackage(ctx, stg, pkg.Dir, e.s.opts.StoreDir)
	if err != nil {
		return pkgBlocks{}, err
	}
	blocks, err := stg.blocks()
	if err != nil {
		return pkgBlocks{}, err
	}
	pb := pkgBlocks{root: c, blocks: blocks, index: blockIndex(blocks)}
	if e.pkgCache == nil {
		e.pkgCache = map[string]pkgBlocks{}
	}
	e.pkgCache[pkg.Dir] = pb
	return pb, nil
}

type result struct {
	node      string
	state     string
	receipt   cid.Cid
	accept    cid.Cid
	memo      bool
	reason    string
	blocks    cas.Packed // every block of the work and its acceptance
	memoKey   string
	attempted bool
	output    map[string]any // the accepted output document, when done
	cancelled bool
	final     cid.Cid // the receipt's final workspace, when done
	tree      *wsTree // that tree, when a node yet to start works on it
}

func (e *execution) emit(n *NodeRecord) {
	if e.pages != nil {
		i := sort.Search(len(e.rec.Nodes), func(i int) bool { return e.rec.Nodes[i].Name >= n.Name })
		e.pages.dirty[i/pageSize] = true
	}
	if e.s.opts.Events == nil {
		return
	}
	ev := Event{Run: e.rec.Run, Node: n.Name, State: n.State, Memo: n.Memo, Reason: n.Reason, At: e.s.stamp()}
	if n.Receipt != nil {
		ev.Receipt = n.Receipt.String()
	}
	e.s.opts.Events(ev)
}

// emitCommitted reports the nodes of a stored batch again, as committed:
// their work and the record that names their state are on disk.
func (e *execution) emitCommitted(b *batch) {
	if e.s.opts.Events == nil {
		return
	}
	for _, r := range b.results {
		ev := Event{Run: e.rec.Run, Node: r.node, State: r.state, Memo: r.memo, Reason: r.reason, Committed: true, At: e.s.stamp()}
		if r.receipt.Defined() {
			ev.Receipt = r.receipt.String()
		}
		e.s.opts.Events(ev)
	}
}

func (e *execution) run(ctx context.Context) (*Record, error) {
	e.countConsumers()
	// Outputs of nodes accepted in an earlier process.
	if err := e.loadDone(ctx); err != nil {
		return nil, err
	}
	if err := e.loadMemoIndex(ctx); err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.initQueue()
	e.mu.Unlock()

	// Up to Jobs workers each take a ready node, run it, apply its result
	// and take the next: the node a result makes ready is started by the
	// same goroutine at once, with no hand-over, and idle workers are
	// woken only when there is more than one node to run.
	var (
		ready   = sync.NewCond(&e.mu)
		active  int      // nodes being invoked
		idle    int      // workers waiting for a ready node
		pending []result // applied, not yet written out
		wg      sync.WaitGroup
	)
	worker := func() {
		defer wg.Done()
		e.mu.Lock()
		defer e.mu.Unlock()
		for {
			for ctx.Err() == nil && len(e.queue) == 0 && active > 0 {
				idle++
				ready.Wait()
				idle--
			}
			if ctx.Err() != nil || len(e.queue) == 0 {
				ready.Broadcast() // the run is over for every worker
				return
			}
			name := e.queue[0]
			e.queue = e.queue[1:]
			n := e.rec.node(name)
			if n.State != dag.Ready {
				continue
			}
			if limit := e.plan.MaxAttempts(name); breakerDue(n, limit) {
				// Started as often as allowed already (a node that
				// killed its process each time, say): not again.
				openBreaker(e.rec, n, limit, e.s.actor(), e.s.stamp())
				e.consumed(name)
				e.emit(n)
				e.blockBelow(name)
				continue
			}
			if len(e.queue) > 0 && idle > 0 {
				ready.Signal()
			}
			if n.Receipt != nil {
				// Accepted work a regression above it took back: it
				// stays in the record as an earlier attempt.
				n.Earlier = append(n.Earlier, *n.Receipt)
				n.Receipt, n.Acceptance, n.Memo = nil, nil, false
			}
			n.State = dag.Active
			n.Attempts++
			e.emit(n)
			active++
			e.mu.Unlock()
			r := e.invoke(ctx, name)
			e.mu.Lock()
			active--
			e.applyLocked(r)
			r.output, r.tree = nil, nil // held by e.outputs and e.trees while needed, not until the commit
			pending = append(pending, r)
		}
	}
	wg.Add(e.s.opts.Jobs)
	for range e.s.opts.Jobs {
		go worker()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	// Meanwhile this goroutine writes accepted work out and looks for
	// cancel requests. take hands it what was accepted since the last
	// commit together with the pages of the run record as it stands at
	// that instant, so a stored record never names a node done before the
	// node's blocks are stored.
	take := func() (*batch, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		if len(pending) == 0 {
			return nil, nil
		}
		b := &batch{results: pending}
		pending = nil
		e.rec.Updated = e.s.stamp()
		var err error
		b.pages, b.ref, err = e.encodeRecord(ctx)
		return b, err
	}
	commit := func() error {
		b, err := take()
		if err != nil || b == nil {
			return err
		}
		if err := e.commit(ctx, b); err != nil {
			return err
		}
		e.mu.Lock()
		e.memoStored(b)
		e.emitCommitted(b)
		e.mu.Unlock()
		return nil
	}
	// Each commit is followed by a pause of commitEvery, whatever it took:
	// other commands (hg status, hg put) and memo lookups open the store
	// in that pause, and a slow commit on a big store simply takes what
	// was accepted meanwhile, in one bigger batch.
	next := time.NewTimer(commitEvery)
	defer next.Stop()
	poll := time.NewTicker(cancelPollEvery)
	defer poll.Stop()
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-next.C:
			start := time.Now()
			if err := commit(); err != nil {
				e.cancel()
				<-done
				return nil, err
			}
			next.Reset(max(commitEvery, commitPauseFactor*time.Since(start)))
		case <-poll.C:
			e.pollCancel(ctx)
		}
	}
	if err := commit(); err != nil {
		return nil, err
	}
	return e.settle(ctx)
}

// cancelPollEvery is how often a running scheduler looks for a cancel
// request (hg cancel) in the store.
const cancelPollEvery = 500 * time.Millisecond

// pollCancel looks for a cancel request while nodes run.
func (e *execution) pollCancel(ctx context.Context) {
	st, err := e.s.opts.Store.Open(ctx, true)
	if err != nil {
		return
	}
	defer st.Close()
	if _, err := st.GetRef(ctx, CancelNamespace, e.rec.Run); err == nil {
		e.cancel()
	}
}

// initQueue counts each node's needs not yet done, queues the pending
// nodes with none, and blocks what lies downstream of failed nodes. After
// it, [execution.settled] keeps the counts and the queue up to date, so a
// step of the scheduling loop costs the edges it touches, not the graph.
func (e *execution) initQueue() {
	wo := e.plan.WorkOrder
	e.waiting = make(map[string]int, len(wo.Order))
	e.dependents = make(map[string][]string, len(wo.Order))
	for _, name := range wo.Order {
		for _, up := range wo.Upstream(name) {
			e.dependents[up] = append(e.dependents[up], name)
			if e.rec.node(up).State != dag.Done {
				e.waiting[name]++
			}
		}
	}
	for _, name := range wo.Order {
		n := e.rec.node(name)
		switch {
		case dag.Stops(n.State):
			e.blockBelow(name)
		case n.State == dag.Pending && e.waiting[name] == 0:
			e.enqueue(n)
		}
	}
}

// countConsumers counts, for each node, the pending nodes that will read
// their input from it.
func (e *execution) countConsumers() {
	wo := e.plan.WorkOrder
	e.consumers = make(map[string]int)
	for _, name := range wo.Order {
		if e.rec.node(name).State != dag.Pending {
			continue
		}
		for _, up := range wo.Upstream(name) {
			e.consumers[up]++
		}
		if ws := e.workspaces[name]; ws != nil && ws.From != "" {
			if e.wsReaders == nil {
				e.wsReaders, e.trees = map[string]int{}, map[string]*wsTree{}
			}
			e.wsReaders[ws.From]++
		}
	}
}

// consumed is called once a pending node has built its input, or will
// never build it (it is blocked): the outputs it read are dropped if no
// other node is still to read them. The caller holds e.mu.
func (e *execution) consumed(name string) {
	for _, up := range e.plan.WorkOrder.Upstream(name) {
		if e.consumers[up]--; e.consumers[up] <= 0 {
			delete(e.consumers, up)
			delete(e.outputs, up)
		}
	}
	if ws := e.workspaces[name]; ws != nil && ws.From != "" {
		if e.wsReaders[ws.From]--; e.wsReaders[ws.From] <= 0 {
			delete(e.wsReaders, ws.From)
			delete(e.trees, ws.From)
		}
	}
}

// settled updates the queue after node name reached a final state.
func (e *execution) settled(name string) {
	switch e.rec.node(name).State {
	case dag.Done:
		// A done node's dependents are told once; a waiting count is
		// needed until it reaches zero. Neither is kept longer.
		for _, d := range e.dependents[name] {
			e.waiting[d]--
			if e.waiting[d] > 0 {
				continue
			}
			delete(e.waiting, d)
			if n := e.rec.node(d); n.State == dag.Pending {
				e.enqueue(n)
			}
		}
		delete(e.dependents, name)
	case dag.Failed, dag.Blocked:
		e.blockBelow(name)
	}
}

// enqueue makes a pending node whose needs are all done ready.
func (e *execution) enqueue(n *NodeRecord) {
	n.State = dag.Ready
	e.emit(n)
	e.queue = append(e.queue, n.Name)
}

// blockBelow marks the pending nodes downstream of a failed or blocked
// node as blocked, linking the HALT receipt that blocks them.
func (e *execution) blockBelow(name string) {
	n := e.rec.node(name)
	cause := n.Receipt
	if n.State == dag.Blocked {
		cause = n.BlockedBy
	}
	reason := "upstream " + name + " did not pass"
	switch n.State {
	case dag.Rewritten:
		reason = "upstream " + name + " was rewritten"
	case dag.Deleted:
		reason = "upstream " + name + " was withdrawn"
	}
	stack := append([]string(nil), e.dependents[name]...)
	for len(stack) > 0 {
		d := e.rec.node(stack[len(stack)-1])
		stack = stack[:len(stack)-1]
		if d.State != dag.Pending {
			continue
		}
		d.State, d.BlockedBy, d.Reason = dag.Blocked, cause, reason
		e.consumed(d.Name)
		e.emit(d)
		stack = append(stack, e.dependents[d.Name]...)
	}
}

// loadDone reads the output documents of the nodes done in an earlier
// process that a pending node reads from.
func (e *execution) loadDone(ctx context.Context) error {
	var done []*NodeRecord
	for i := range e.rec.Nodes {
		if n := &e.rec.Nodes[i]; n.State == dag.Done && (e.consumers[n.Name] > 0 || e.wsReaders[n.Name] > 0) {
			done = append(done, n)
		}
	}
	if len(done) == 0 {
		return nil
	}
	st, err := e.s.opts.Store.Open(ctx, true)
	if err != nil {
		return err
	}
	defer st.Close()
	for _, n := range done {
		r, err := ledger.LoadReceipt(ctx, st, n.Receipt.Cid)
		if err != nil {
			return fmt.Errorf("node %q: %w", n.Name, err)
		}
		out, err := receiptOutput(ctx, st, n.Receipt.Cid, r)
		if err != nil {
			return fmt.Errorf("node %q: %w", n.Name, err)
		}
		e.outputs[n.Name] = out
		if e.wsReaders[n.Name] > 0 && r.FinalWorkspace != nil {
			// A node that works on it and finds none fails, naming it.
			if e.trees[n.Name], err = storedTree(ctx, st, r.FinalWorkspace.Cid); err != nil {
				return fmt.Errorf("node %q: final workspace: %w", n.Name, err)
			}
		}
	}
	return nil
}

// outputOf returns the output document of an accepted receipt.
func outputOf(ctx context.Context, st cas.Store, receipt cid.Cid) (map[string]any, error) {
	r, err := ledger.LoadReceipt(ctx, st, receipt)
	if err != nil {
		return nil, err
	}
	return receiptOutput(ctx, st, receipt, r)
}

// receiptOutput returns the output document of the receipt r, stored at
// receipt.
func receiptOutput(ctx context.Context, st cas.Store, receipt cid.Cid, r *ledger.Receipt) (map[string]any, error) {
	if r.Output == nil {
		return nil, fmt.Errorf("receipt %s has no output", receipt)
	}
	var p ledger.Packet
	err := st.View(ctx, r.Output.Cid, func(data []byte) error { return cas.Unmarshal(data, &p) })
	if err != nil {
		return nil, err
	}
	// Values over the block limit are stored apart: read them back.
	return ledger.InlinePayload(ctx, st, p.Payload)
}

// invoke runs one node: input by pointer from upstream outputs, the memo
// cache, the Haygent against a staging store, and the acceptance.
func (e *execution) invoke(ctx context.Context, name string) result {
	res := result{node: name}
	fail := func(state, format string, args ...any) result { return res.fail(ctx, state, format, args...) }
	wo := e.plan.WorkOrder
	pkg := e.plan.Packages[name]
	e.mu.Lock()
	var upstream []cid.Cid
	for _, up := range wo.Upstream(name) {
		n := e.rec.node(up)
		if n.State != dag.Done || n.Receipt == nil {
			e.consumed(name)
			e.mu.Unlock()
			return fail(dag.Failed, "upstream %s is %s, with no receipt", up, n.State)
		}
		if n.Acceptance == nil {
			e.consumed(name)
			e.mu.Unlock()
			return fail(dag.Failed, "upstream %s is done, with no acceptance", up)
		}
		upstream = append(upstream, n.Receipt.Cid)
	}
	outputs := e.outputs
	input, err := wo.Nodes[name].Resolve(func(from, pointer string) (any, error) {
		return dag.Lookup(outputs[from], pointer)
	})
	// The workspace: a tree the Work Order names, or the final workspace
	// of the upstream node it names, which its accepted receipt records.
	ws := e.workspaces[name]
	var given *wsTree
	if ws != nil && ws.From != "" {
		given = e.trees[ws.From]
	}
	readers := e.wsReaders[name]
	e.consumed(name)
	e.mu.Unlock()
	if err != nil {
		return fail(dag.Failed, "input: %v", err)
	}
	switch {
	case ws != nil && ws.From != "" && given == nil:
		return fail(dag.Failed, "workspace: upstream %s's accepted receipt records no final workspace", ws.From)
	case ws != nil && ws.Tree != nil:
		if given, err = e.storedTree(ctx, ws.Tree.Cid); err != nil {
			return fail(dag.Failed, "workspace: %v", err)
		}
	}
	// The memo key: package, input, permissions, adapter.
	pb, err := e.packageBlocks(ctx, pkg)
	if err != nil {
		return fail(dag.Failed, "package: %v", err)
	}
	pkgCID := pb.root
	if want := e.packages[name]; pkgCID != want {
		return fail(dag.Failed, "package: %s has changed since the run started: the work order names %s, the directory now holds %s", pkg.Dir, want, pkgCID)
	}
	inData, err := cas.EncodeNode(cas.FromJSON(input))
	if err != nil {
		return fail(dag.Failed, "input: %v", err)
	}
	res.memoKey = e.memoKey(pkg, pkgCID, cas.Sum(cas.DagCBOR, inData), given)
	if hit, tree, ok := e.reuse(ctx, res.memoKey, readers, pb.index); ok {
		res.state, res.receipt, res.accept, res.memo, res.output = dag.Done, hit.receipt, hit.accept, true, hit.output
		res.final, res.tree = hit.final, tree
		return res
	}
	// What the node must find: what its read grants let it see of the
	// tree it is given, or the empty tree.
	wantWorkspace := emptyWorkspace
	inv := Invocation{
		Run: e.rec.Run, Node: name, Package: pkgCID, PackageBlocks: pb.blocks,
		Input: input, Upstream: upstream,
	}
	var wsIndex map[cid.Cid]cas.Block
	if given != nil {
		if wantWorkspace, err = WorkspaceView(ctx, blockReader(ctx, given.index, nil), given.root, pkg.Permissions); err != nil {
			return fail(dag.Failed, "workspace: %v", err)
		}
		inv.Workspace, inv.WorkspaceBlocks, wsIndex = given.root, given.blocks, given.index
	}
	e.s.mu.Lock()
	e.s.ranNodes++
	e.s.mu.Unlock()
	res.attempted = true
	out, err := e.invokeEngine(ctx, inv, pb.index, wsIndex)
	if err != nil {
		return fail(dag.Failed, "%v", err)
	}
	e.mu.Lock()
	if n := e.rec.node(name); n.State == dag.Active {
		n.State = dag.Concluded
		e.emit(n)
	}
	e.mu.Unlock()
	// Concluded: the engine says it is finished. The receipt must be for
	// this node's work: its package and its input, whatever engine ran it.
	w := &work{pkg: pkgCID, run: NodeRunID(e.rec.Run, name), upstream: upstream, workspace: wantWorkspace}
	return e.accept(ctx, res, out, pb, w, input, readers)
}

// fail ends a node's work in state, for the reason format says. A record
// never names a receipt or acceptance whose blocks it does not commit; a
// node cut short without them was cancelled if the run was, and runs
// again on resume.
func (res *result) fail(ctx context.Context, state, format string, args ...any) result {
	res.state, res.reason = state, fmt.Sprintf(format, args...)
	if res.blocks.Len() == 0 {
		res.receipt, res.accept = cid.Undef, cid.Undef
		res.cancelled = ctx.Err() != nil
	}
	return *res
}

// storedTree reads a tree the Work Order names from the store, once per
// execution.
func (e *execution) storedTree(ctx context.Context, c cid.Cid) (*wsTree, error) {
	e.storedMu.Lock()
	defer e.storedMu.Unlock()
	if t, ok := e.stored[c]; ok {
		return t, nil
	}
	st, err := e.s.opts.Store.Open(ctx, true)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	t, err := storedTree(ctx, st, c)
	if err != nil {
		return nil, err
	}
	if e.stored == nil {
		e.stored = map[cid.Cid]*wsTree{}
	}
	e.stored[c] = t
	return t, nil
}

// invokeEngine runs inv on the configured engine, or on a local one,
// which is handed the indexes by CID of the package's and the
// workspace's blocks that the scheduler holds (wsIndex nil for a node
// given no workspace).
func (e *execution) invokeEngine(ctx context.Context, inv Invocation, pkgIndex, wsIndex map[cid.Cid]cas.Block) (Outcome, error) {
	if e.s.opts.Engine != nil {
		inv.Signatures = e.s.cache.Signatures()
		return e.s.opts.Engine.Invoke(ctx, inv)
	}
	plan := e.plan
	local := &Local{Key: e.s.opts.Key, Signatures: e.s.cache.Signatures(), Adapter: e.s.opts.Adapter, StoreDir: e.s.opts.StoreDir,
		Package: func(inv Invocation) (*haygent.Package, error) {
			p, ok := plan.Packages[inv.Node]
			if !ok {
				return nil, fmt.Errorf("no package for node %q", inv.Node)
			}
			return p, nil
		}}
	return local.invoke(ctx, inv, pkgIndex, wsIndex)
}

// applyLocked records a finished node in memory, so that its downstream
// nodes can start at once. The caller holds e.mu.
func (e *execution) applyLocked(r result) {
	n := e.rec.node(r.node)
	n.State, n.Reason, n.Memo = r.state, r.reason, r.memo
	if r.receipt.Defined() {
		if k := len(n.Earlier); k > 0 && n.Earlier[k-1].Cid == r.receipt {
			// The memo cache gave back the receipt the node held before
			// it ran again: it is its current one, not an earlier one.
			n.Earlier = n.Earlier[:k-1]
		}
		n.Receipt = &cas.Link{Cid: r.receipt}
	}
	if r.accept.Defined() {
		n.Acceptance = &cas.Link{Cid: r.accept}
	}
	if r.state == dag.Failed && r.cancelled {
		n.State, n.Reason = dag.Cancelled, "cancelled"
	}
	if n.State == dag.Done {
		if e.consumers[r.node] > 0 {
			e.outputs[r.node] = r.output
		}
		if e.wsReaders[r.node] > 0 && r.tree != nil {
			e.trees[r.node] = r.tree
		}
		if !r.memo && r.memoKey != "" && !e.s.opts.NoCache {
			if e.memoRun == nil {
				e.memoRun = map[string]memoHit{}
			}
			// Its blocks are held until the commit, which drops the
			// entry: a hit meanwhile finds its final workspace there.
			e.memoRun[r.memoKey] = memoHit{receipt: r.receipt, accept: r.accept, output: r.output, final: r.final, blocks: r.blocks}
		}
	}
	e.emit(n)
	e.settled(r.node)
}

// settle decides the run's outcome: done only when every required node is
// done and no node the required ones depend on is pending, active or
// blocked.
func (e *execution) settle(ctx context.Context) (*Record, error) {
	if ctx.Err() != nil {
		for i := range e.rec.Nodes {
			if n := &e.rec.Nodes[i]; n.State == dag.Pending || n.State == dag.Ready || n.State == dag.Blocked {
				n.State, n.Reason = dag.Cancelled, "cancelled before it started"
			}
		}
	}
	held, reason := outcome(e.rec.Nodes, e.plan.WorkOrder)
	switch {
	case held:
		e.rec.Status, e.rec.Reason = StatusDone, reason
	case ctx.Err() != nil:
		e.rec.Status, e.rec.Reason = StatusCancelled, "cancelled: "+strings.Join(stuckNodes(e.rec.Nodes, e.plan.WorkOrder), ", ")
	default:
		e.rec.Status, e.rec.Reason = StatusHalted, reason
	}
	e.rec.Updated = e.s.stamp()
	e.pages = nil // settle may have changed any node: store every page
	st, err := e.s.opts.Store.Open(context.WithoutCancel(ctx), false)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if err := e.saveRecord(context.WithoutCancel(ctx), st); err != nil {
		return nil, err
	}
	return e.rec, nil
}

// stuckNodes lists, as "name (state)", the nodes the run's outcome needs
// that are not done: a run is done when there are none.
func stuckNodes(nodes []NodeRecord, wo *dag.WorkOrder) []string {
	mandatory := mandatoryNodes(wo)
	var stuck []string
	for _, n := range nodes {
		if mandatory[n.Name] && n.State != dag.Done {
			stuck = append(stuck, n.Name+" ("+n.State+")")
		}
	}
	return stuck
}

// outcome is the outcome gate: a run is complete only when its target
// state is reached (every required node done) and no mandatory action
// remains (every node the required ones need, and every node the order
// declares mandatory with what it needs, done). reason says which of the
// two fails, naming the nodes, or that both hold.
func outcome(nodes []NodeRecord, wo *dag.WorkOrder) (held bool, reason string) {
	required := map[string]bool{}
	for _, r := range wo.Required() {
		required[r] = true
	}
	mandatory := mandatoryNodes(wo)
	var target, remaining []string
	for _, n := range nodes {
		state := n.State
		if n.Breaker {
			state += ", breaker open"
		}
		switch {
		case n.State == dag.Done:
		case required[n.Name]:
			target = append(target, n.Name+" ("+state+")")
		case mandatory[n.Name]:
			remaining = append(remaining, n.Name+" ("+state+")")
		}
	}
	if len(target) == 0 && len(remaining) == 0 {
		return true, "target state reached; no mandatory action remains"
	}
	var parts []string
	if len(target) > 0 {
		parts = append(parts, "target state not reached: "+strings.Join(target, ", "))
	}
	if len(remaining) > 0 {
		parts = append(parts, "mandatory actions remain: "+strings.Join(remaining, ", "))
	}
	return false, strings.Join(parts, "; ")
}

// mandatoryNodes returns the nodes a run's outcome needs: the required
// ones, the ones declared mandatory and everything they need, in one walk.
func mandatoryNodes(wo *dag.WorkOrder) map[string]bool {
	mandatory := map[string]bool{}
	stack := append(wo.Required(), wo.Mandatory...)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !mandatory[n] {
			mandatory[n] = true
			stack = append(stack, wo.Upstream(n)...)
		}
	}
	return mandatory
}

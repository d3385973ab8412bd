package scheduler

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/verify"
	"github.com/ipfs/go-cid"
)

// Opener gives the scheduler short-lived access to the store, so that other
// commands can use it between the scheduler's transactions. The caller
// closes what Open returns.
type Opener interface {
	Open(ctx context.Context, readOnly bool) (cas.Store, error)
}

// Shared is an Opener over an open store that stays open (tests, benchmarks,
// a long-lived server); Close on what it returns does nothing.
type Shared struct{ Store cas.Store }

func (s Shared) Open(context.Context, bool) (cas.Store, error) {
	if a, ok := s.Store.(cas.Adopter); ok {
		return noCloseAdopter{noClose{s.Store}, a}, nil
	}
	return noClose{s.Store}, nil
}

type noClose struct{ cas.Store }

func (noClose) Close() error { return nil }

// noCloseAdopter keeps an in-memory store's Adopt, so that committed
// blocks are handed over rather than copied.
type noCloseAdopter struct {
	noClose
	a cas.Adopter
}

func (n noCloseAdopter) Adopt(blocks ...cas.Block) error { return n.a.Adopt(blocks...) }

// Options configure a scheduler.
type Options struct {
	Store   Opener
	Key     ed25519.PrivateKey  // signs the receipts of the nodes this process runs
	Trusted []ed25519.PublicKey // runner keys whose receipts are accepted; Key's is always trusted
	Jobs    int                 // nodes run at once; 0 means 1
	NoCache bool                // bypass the memo cache
	Adapter haygent.Adapter     // answers slots
	// StoreDir is the directory of the store, when it has one: a
	// workspace directory that holds it is stored without it.
	StoreDir string
	// Engine runs the invocations; nil means [Local] with Key, Adapter
	// and StoreDir.
	Engine Engine
	// Events, if set, is told of every change of a node's state.
	Events func(Event)
	Now    func() time.Time
	// Retry, for Execute of an existing run, runs its failed nodes again
	// (a HALT, a rejected receipt, an engine error) and the nodes they
	// blocked. A failed node's receipt moves to its Earlier list, so the
	// record keeps every attempt. Done nodes never run again.
	Retry bool
}

// Event is a change of a node's state. A node's finished work is reported
// twice: when the scheduler accepts (or refuses) it, and again, with
// Committed set, once its blocks and the run record naming its state are
// stored and synced. Until then a crash loses the work, and a resume runs
// the node again; a consumer that must not believe in such work waits for
// the committed event.
type Event struct {
	Run       string `json:"run"`
	Node      string `json:"node"`
	State     string `json:"state"`
	Receipt   string `json:"receipt,omitempty"`
	Memo      bool   `json:"memo,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Committed bool   `json:"committed,omitempty"`
	At        string `json:"at"`
}

// Plan is a Work Order resolved against its Haygent packages, ready to run.
type Plan struct {
	WorkOrder *dag.WorkOrder
	Packages  map[string]*haygent.Package // by node
	Dir       string                      // the Work Order's directory
	// Decisions records how the clarifier bound the order's decision
	// slots, whose values [dag.WorkOrder.Bind] has put into the inputs;
	// Start stores it in the run record.
	Decisions []DecisionRec
}

// ErrInvalidWorkOrder is wrapped by every problem found before a run.
var ErrInvalidWorkOrder = errors.New("invalid Work Order")

// Load parses and validates the Work Order file and loads its packages.
// Nothing runs, and nothing is stored.
func Load(path string) (*Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	wo, err := dag.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	pkgs := map[string]*haygent.Package{}
	checked := map[string]bool{}
	res := dag.SchemaResolver(dir, func(d string) (map[string]any, error) {
		if !checked[d] {
			if _, err := haygent.Load(d); err != nil {
				return nil, err
			}
			checked[d] = true
		}
		raw, err := os.ReadFile(filepath.Join(d, haygent.OutputSchema))
		if err != nil {
			return nil, err
		}
		var schema map[string]any
		if err := jsonUnmarshal(raw, &schema); err != nil {
			return nil, err
		}
		return schema, nil
	})
	if err := wo.Validate(res); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := checkWorkspaceDirs(wo, dir); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	byDir := map[string]*haygent.Package{}
	for _, name := range wo.Order {
		n := wo.Nodes[name]
		pdir := n.Haygent
		if !filepath.IsAbs(pdir) {
			pdir = filepath.Join(dir, filepath.FromSlash(pdir))
		}
		pkg, ok := byDir[pdir]
		if !ok {
			if pkg, err = haygent.Load(pdir); err != nil {
				return nil, fmt.Errorf("node %q: %w", name, err)
			}
			byDir[pdir] = pkg
		}
		pkgs[name] = pkg
	}
	return &Plan{WorkOrder: wo, Packages: pkgs, Dir: dir}, nil
}

// Scheduler runs plans.
type Scheduler struct {
	opts Options
	// cache is what acceptance remembers between receipts (signatures,
	// compiled gates), shared with the local engine's runtime so that a
	// receipt it signed is not checked by ed25519 again here.
	cache *verify.Cache
	// ranNodes counts the invocations this scheduler actually ran (memo
	// hits excluded), for tests and progress.
	mu       sync.Mutex
	ranNodes int
}

// New returns a scheduler.
func New(opts Options) *Scheduler {
	if opts.Jobs < 1 {
		opts.Jobs = 1
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Key != nil {
		opts.Trusted = append(opts.Trusted, opts.Key.Public().(ed25519.PublicKey))
	}
	return &Scheduler{opts: opts, cache: verify.NewCache()}
}

// Ran returns how many invocations this scheduler ran (memo hits
// excluded).
func (s *Scheduler) Ran() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ranNodes
}

func (s *Scheduler) stamp() string { return s.opts.Now().UTC().Format(time.RFC3339Nano) }

// actor is who the events this scheduler records are by: the scheduler,
// with its runner key.
func (s *Scheduler) actor() Actor {
	a := Actor{Who: VerifierName}
	if s.opts.Key != nil {
		a.Key = ledger.FormatPublicKey(s.opts.Key.Public().(ed25519.PublicKey))
	}
	return a
}

// CheckRunID checks a run id given by a user: "run-" and then letters,
// digits and ._- (no "/": RUN/NODE names a node of a run).
func CheckRunID(id string) error {
	rest, ok := strings.CutPrefix(id, "run-")
	if !ok || rest == "" || strings.Contains(rest, "/") || cas.CheckPinName(id) != nil {
		return fmt.Errorf("run id %q: want run- followed by letters, digits and ._-", id)
	}
	return nil
}

// Start stores the Work Order and a new run record, and returns the run id:
// id if it is not empty, else a new one. An id already in use is an error.
func (s *Scheduler) Start(ctx context.Context, plan *Plan, id string) (string, error) {
	run := id
	if run == "" {
		var b [6]byte
		rand.Read(b[:])
		run = "run-" + s.opts.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
	} else if err := CheckRunID(run); err != nil {
		return "", err
	}
	st, err := s.opts.Store.Open(ctx, false)
	if err != nil {
		return "", err
	}
	defer st.Close()
	if _, err := st.GetRef(ctx, RefNamespace, run); err == nil {
		return "", fmt.Errorf("run %s already exists (use 'hg resume %s')", run, run)
	}
	w := cas.NewWriter(st)
	nodes := map[string]cid.Cid{}
	stored := map[string]cid.Cid{} // by package directory
	for name, pkg := range plan.Packages {
		c, ok := stored[pkg.Dir]
		if !ok {
			stg := newStaging(nil)
			var err error
			if c, err = cas.PutTree(ctx, stg, pkg.Dir, nil); err != nil {
				return "", err
			}
			blocks, err := stg.blocks()
			if err != nil {
				return "", err
			}
			for _, blk := range blocks {
				if err := w.Add(ctx, blk); err != nil {
					return "", err
				}
			}
			stored[pkg.Dir] = c
		}
		nodes[plan.WorkOrder.Nodes[name].Haygent] = c
	}
	// Workspace directories are stored and pins resolved now: the stored
	// Work Order names every workspace by its tree.
	wo, err := storeWorkspaces(ctx, st, plan, s.opts.StoreDir)
	if err != nil {
		return "", err
	}
	obj, err := wo.Object(nodes)
	if err != nil {
		return "", err
	}
	data, err := cas.Marshal(&obj)
	if err != nil {
		return "", err
	}
	// A Work Order over the block limit (a 20 MB input, 100,000 nodes)
	// is stored as a file under an envelope that lists its links;
	// LoadWorkOrder reads either.
	wob, err := cas.PutObject(ctx, w, data)
	if err != nil {
		return "", fmt.Errorf("store the work order: %w", err)
	}
	rec := &Record{Type: TypeRun, Run: run, WorkOrder: cas.Link{Cid: wob}, Name: plan.WorkOrder.Name,
		Objective: plan.WorkOrder.Objective, Status: StatusRunning, Started: s.stamp(), Updated: s.stamp(),
		Decisions: plan.Decisions}
	if len(plan.WorkOrder.Decisions) > 0 {
		rec.Class = plan.WorkOrder.Class
	}
	for _, name := range sortedNames(plan.WorkOrder) {
		rec.Nodes = append(rec.Nodes, NodeRecord{Name: name, State: dag.Pending})
	}
	blocks, root, err := encodeRecord(ctx, rec, nil)
	if err != nil {
		return "", err
	}
	for _, blk := range blocks {
		if err := w.Add(ctx, blk); err != nil {
			return "", err
		}
	}
	if err := w.Flush(ctx); err != nil {
		return "", err
	}
	return run, st.SetRef(ctx, RefNamespace, run, root)
}

func sortedNames(wo *dag.WorkOrder) []string {
	names := slices.Clone(wo.Order)
	sort.Strings(names)
	return names
}

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

// CancelNamespace holds cancel requests: cancel/RUN exists while a cancel
// of RUN is pending.
const CancelNamespace = "cancel"

// Cancel stops a run: it records the request, which a process executing
// the run notices at its next commit (its running steps are killed, its
// finished receipts kept), and marks every node that is not finished
// cancelled in the stored record, for a run no process is executing.
func Cancel(ctx context.Context, st cas.Store, run string, now time.Time) (*Record, error) {
	rec, c, err := LoadRecord(ctx, st, run)
	if err != nil {
		return nil, err
	}
	if err := st.SetRef(ctx, CancelNamespace, run, c); err != nil {
		return nil, err
	}
	for i := range rec.Nodes {
		switch rec.Nodes[i].State {
		case dag.Pending, dag.Ready, dag.Active, dag.Concluded:
			rec.Nodes[i].State, rec.Nodes[i].Reason = dag.Cancelled, "cancelled on request"
		}
	}
	if rec.Status == StatusRunning {
		// As settle decides it: a run whose required nodes are all done
		// is done, whatever else was still running.
		rec.Status, rec.Reason = StatusCancelled, "cancelled on request"
		_, wo, err := LoadWorkOrder(ctx, st, rec)
		if err != nil {
			return nil, err
		}
		if held, reason := outcome(rec.Nodes, wo); held {
			rec.Status, rec.Reason = StatusDone, reason
		}
	}
	rec.Updated = now.UTC().Format(time.RFC3339Nano)
	blocks, root, err := encodeRecord(ctx, rec, nil)
	if err != nil {
		return nil, err
	}
	if err := st.Put(ctx, blocks...); err != nil {
		return nil, err
	}
	return rec, st.SetRef(ctx, RefNamespace, run, root)
}

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
	c, err := cas.PutTree(ctx, stg, pkg.Dir, nil)
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

// batch is one commit's work: the results accepted since the last commit
// and the run record's changed pages and new root, encoded when the
// results were taken.
type batch struct {
	results []result
	pages   []cas.Block
	ref     cas.Ref
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

// loadMemoIndex reads every memo entry of the store, once per run, so that
// looking a node up costs a map access, not a transaction. Entries other
// processes add during the run are not seen; that only costs a rerun.
func (e *execution) loadMemoIndex(ctx context.Context) error {
	if e.s.opts.NoCache {
		return nil
	}
	st, err := e.s.opts.Store.Open(ctx, true)
	if err != nil {
		return err
	}
	defer st.Close()
	refs, err := st.Refs(ctx, MemoNamespace)
	if err != nil {
		return err
	}
	e.memoIndex = make(map[string]cid.Cid, len(refs))
	for _, r := range refs {
		e.memoIndex[r.Name] = r.CID
	}
	return nil
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
	fail := func(state, format string, args ...any) result {
		res.state, res.reason = state, fmt.Sprintf(format, args...)
		// A record never names a receipt or acceptance whose blocks it
		// does not commit; a node cut short without them was cancelled
		// if the run was, and runs again on resume.
		if res.blocks.Len() == 0 {
			res.receipt, res.accept = cid.Undef, cid.Undef
			res.cancelled = ctx.Err() != nil
		}
		return res
	}
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
	adapter := "none"
	if e.s.opts.Adapter != nil {
		adapter = e.s.opts.Adapter.Name() + "/" + e.s.opts.Adapter.Model()
	}
	h := sha256.New()
	fmt.Fprintf(h, "hg-memo/1\n%s\n%s\n%s\n%s\n", pkgCID, cas.Sum(cas.DagCBOR, inData), strings.Join(pkg.Permissions.Snapshot(), "\n"), adapter)
	if given != nil {
		// The tree the node starts from is part of its work; a node
		// given none keeps the key it always had.
		fmt.Fprintf(h, "workspace %s\n", given.root)
	}
	res.memoKey = hex.EncodeToString(h.Sum(nil))
	if !e.s.opts.NoCache {
		e.mu.Lock()
		hit, ok := e.memoRun[res.memoKey]
		stored, inStore := e.memoIndex[res.memoKey]
		e.mu.Unlock()
		if !ok && inStore {
			hit, ok = e.memo(ctx, stored)
		}
		if ok && !e.regressed[hit.receipt] {
			// A node that others work on hands on its final workspace:
			// an entry that cannot is not reused.
			var tree *wsTree
			if readers > 0 {
				tree = e.memoTree(ctx, hit, pb.index)
			}
			if readers == 0 || tree != nil {
				res.state, res.receipt, res.accept, res.memo, res.output = dag.Done, hit.receipt, hit.accept, true, hit.output
				res.final, res.tree = hit.final, tree
				return res
			}
		}
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
	// Concluded: the engine says it is finished. Done only once accepted,
	// by this code, from the blocks alone: nothing the engine said is
	// taken on trust.
	// The engine's blocks are handed over, not copied: nothing else
	// holds them.
	stg := newStaging(pb.index)
	if err := stg.Adopt(out.Blocks...); err != nil {
		return fail(dag.Failed, "%v", err)
	}
	res.receipt = out.Receipt
	// The work is done: it is judged whatever happens to the run
	// meanwhile, so that a cancel arriving now does not leave a receipt
	// without a verdict.
	vctx := context.WithoutCancel(ctx)
	// The package tree was stored and hashed by this scheduler; every
	// other block of the receipt's closure is walked and re-hashed.
	v, err := verify.VerifyReceiptKnown(vctx, stg, out.Receipt, e.s.opts.Trusted, map[cid.Cid]bool{pkgCID: true}, e.s.cache)
	if err != nil {
		return fail(dag.Failed, "verify: %v", err)
	}
	acc := Acceptance{Type: TypeAcceptance, Receipt: cas.Link{Cid: out.Receipt}, Status: v.Status,
		Verifier: VerifierName, At: e.s.stamp(), Verdict: "accepted"}
	for _, c := range v.Checks {
		acc.Checks = append(acc.Checks, CheckRec{Name: c.Name, OK: c.OK, Detail: c.Detail})
	}
	// The receipt must be for this node's work: its package and its input,
	// whatever engine ran it.
	w := &work{pkg: pkgCID, run: NodeRunID(e.rec.Run, name), upstream: upstream, workspace: wantWorkspace}
	if w.input, err = inputPacket(vctx, input, upstream); err != nil {
		w.why = fmt.Sprintf("the node's input packet cannot be made: %v", err)
	}
	acc.Checks = append(acc.Checks, sameWorkCheck(v, w))
	if !v.OK() || !acc.Checks[len(acc.Checks)-1].OK {
		acc.Verdict = "rejected"
	}
	data, err := cas.Marshal(&acc)
	if err != nil {
		return fail(dag.Failed, "%v", err)
	}
	ab := cas.NewBlock(cas.DagCBOR, data)
	if err := stg.Put(vctx, ab); err != nil {
		return fail(dag.Failed, "%v", err)
	}
	res.accept = ab.CID()
	blocks, err := stg.blocks()
	if err != nil {
		return fail(dag.Failed, "%v", err)
	}
	res.blocks = cas.Pack(blocks...)
	switch {
	case acc.Verdict != "accepted":
		for _, c := range acc.Checks {
			if !c.OK {
				return fail(dag.Failed, "receipt rejected: %s: %s", c.Name, c.Detail)
			}
		}
		return fail(dag.Failed, "receipt rejected")
	case v.Status != ledger.StatusPass:
		r, err := ledger.LoadReceipt(vctx, stg, out.Receipt)
		if err != nil || r.Halt == nil {
			return fail(dag.Failed, "HALT")
		}
		return fail(dag.Failed, "HALT: %s %s: %s", r.Halt.FailedGate, r.Halt.Verdict, r.Halt.Reason)
	}
	if v.Output == nil {
		return fail(dag.Failed, "output: receipt %s has no output", out.Receipt)
	}
	res.output = v.Output.Payload
	if f := v.Object.FinalWorkspace; f != nil {
		res.final = f.Cid
		if readers > 0 {
			// Verified with the rest of the work: its blocks are there.
			if res.tree, err = treeFrom(f.Cid, packedIndex(res.blocks), pb.index); err != nil {
				return fail(dag.Failed, "final workspace: %v", err)
			}
		}
	}
	res.state = dag.Done
	return res
}

type memoHit struct {
	receipt, accept cid.Cid
	output          map[string]any
	final           cid.Cid    // the receipt's final workspace, if it records one
	blocks          cas.Packed // the work's blocks, for an entry this run made and has not stored yet
}

// sameWorkCheck is the acceptance's check that a verified receipt is the
// node's work w: its workspace snapshot is what the package's read grants
// let it see of the tree it was given.
func sameWorkCheck(v *verify.Verification, w *work) CheckRec {
	c := CheckRec{Name: "same work"}
	if c.Detail = sameWork(v, w, &acceptWords); c.Detail != "" {
		return c
	}
	c.OK, c.Detail = true, "package "+w.pkg.String()+" on the node's input"
	if w.workspace != emptyWorkspace {
		c.Detail += " and workspace " + w.workspace.String()
	}
	return c
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

// memoTree returns the final workspace of a memo hit, from the blocks of
// work this run has not stored yet or from the store; nil if it has none
// or it cannot be read.
func (e *execution) memoTree(ctx context.Context, hit memoHit, base map[cid.Cid]cas.Block) *wsTree {
	if !hit.final.Defined() {
		return nil
	}
	if hit.blocks.Len() > 0 {
		t, err := treeFrom(hit.final, packedIndex(hit.blocks), base)
		if err != nil {
			return nil
		}
		return t
	}
	st, err := e.s.opts.Store.Open(ctx, true)
	if err != nil {
		return nil
	}
	defer st.Close()
	t, err := storedTree(ctx, st, hit.final)
	if err != nil {
		return nil
	}
	return t
}

// invokeEngine runs inv on the configured engine, or on a local one,
// which is handed the indexes by CID of the package's and the
// workspace's blocks that the scheduler holds (wsIndex nil for a node
// given no workspace).
func (e *execution) invokeEngine(ctx context.Context, inv Invocation, pkgIndex, wsIndex map[cid.Cid]cas.Block) (Outcome, error) {
	if e.s.opts.Engine != nil {
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

// memo reads the memo entry whose acceptance is c; a hit must still be an
// accepted PASS, signed by a key this scheduler trusts: an entry another
// run accepted under keys it trusted (a worker's, with hg run --trust) is
// not this run's to reuse unless this run trusts them too.
func (e *execution) memo(ctx context.Context, c cid.Cid) (memoHit, bool) {
	st, err := e.s.opts.Store.Open(ctx, true)
	if err != nil {
		return memoHit{}, false
	}
	defer st.Close()
	var acc Acceptance
	if err := st.View(ctx, c, func(d []byte) error { return cas.Unmarshal(d, &acc) }); err != nil {
		return memoHit{}, false
	}
	if acc.Type != TypeAcceptance || acc.Verdict != "accepted" || acc.Status != ledger.StatusPass {
		return memoHit{}, false
	}
	r, err := ledger.LoadReceipt(ctx, st, acc.Receipt.Cid)
	if err != nil || !slices.ContainsFunc(e.s.opts.Trusted, func(k ed25519.PublicKey) bool { return bytes.Equal(k, r.Signer) }) {
		return memoHit{}, false
	}
	out, err := receiptOutput(ctx, st, acc.Receipt.Cid, r)
	if err != nil {
		return memoHit{}, false
	}
	hit := memoHit{receipt: acc.Receipt.Cid, accept: c, output: out}
	if r.FinalWorkspace != nil {
		hit.final = r.FinalWorkspace.Cid
	}
	return hit, true
}

// commitEvery is the pause after each commit of accepted work before the
// next. A crash loses at most the work accepted since the last commit
// began, which the resumed run does again.
const commitEvery = 100 * time.Millisecond

// commitPauseFactor: the pause after a commit is at least this many times
// what the commit took. A store keyed by CID puts a batch's blocks on
// leaves all over its index, so a commit costs up to the whole index
// whatever its size, and on a big store (a million blocks at 100,000
// nodes) pauses of commitEvery made most commits rewrite a leaf for
// nearly every block. Pausing in proportion gathers bigger batches there,
// so the writes stay within a third of one core's time; on a small store
// commits are quick and the pause stays commitEvery.
const commitPauseFactor = 2

// commitChunk is how many blocks of a commit, in key order, go in one
// transaction. A transaction over a range of keys touches only that part
// of the index, so the leaves a store materializes in memory at once stay
// bounded however big the batch.
var commitChunk = 16384 // tests lower it

// memoStored moves the memo entries of a committed batch from memoRun,
// which holds their output documents, to memoIndex, which names them in
// the store: a run of 100,000 nodes kept every output in memory until it
// ended. The caller holds e.mu.
func (e *execution) memoStored(b *batch) {
	for _, r := range b.results {
		if hit, ok := e.memoRun[r.memoKey]; ok && hit.accept == r.accept {
			delete(e.memoRun, r.memoKey)
			if e.memoIndex == nil {
				e.memoIndex = map[string]cid.Cid{}
			}
			e.memoIndex[r.memoKey] = r.accept
		}
	}
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

// commit writes out finished nodes: their blocks and the changed pages of
// the run record in as few transactions as the writer's batches allow,
// then every memo entry and the run's new root in one more.
func (e *execution) commit(ctx context.Context, b *batch) error {
	ctx = context.WithoutCancel(ctx)
	st, err := e.s.opts.Store.Open(ctx, false)
	if err != nil {
		return err
	}
	defer st.Close()
	// The batch's blocks are the main loop's alone: no lock while they
	// are written, so running nodes go on. They go in key order, in
	// transactions of commitChunk blocks: a store keyed by CID puts a
	// batch's blocks on pages all over its index, so each transaction of
	// blocks in random order rewrites up to the whole index (batches of
	// the writer's default size in the order made, made a big commit cost
	// twenty times what one transaction does), while consecutive key
	// ranges share no leaf. The refs go last, so a crash between two of
	// these transactions leaves only unreferenced blocks, which gc drops.
	var refs []cas.Ref
	packs := []cas.Packed{cas.Pack(b.pages...)}
	for _, r := range b.results {
		packs = append(packs, r.blocks)
		if r.state == dag.Done && !r.memo && r.memoKey != "" {
			refs = append(refs, cas.Ref{NS: MemoNamespace, Name: r.memoKey, CID: r.accept})
		}
	}
	if err := putInKeyOrder(ctx, st, packs, commitChunk); err != nil {
		return err
	}
	return st.SetRefs(ctx, append(refs, b.ref)...)
}

// putInKeyOrder stores the blocks of packs in the order of their CIDs'
// bytes, in Puts of at most chunk blocks each, the next chunk gathered
// while one is written. Only the blocks of the chunks being written are
// taken out of their packs at a time.
func putInKeyOrder(ctx context.Context, st cas.Store, packs []cas.Packed, chunk int) error {
	w := cas.NewWriter(st)
	w.MaxBlocks, w.MaxBytes = chunk, math.MaxInt
	for _, at := range keyOrder(packs) {
		if err := w.Add(ctx, packs[at.pack].Block(at.off)); err != nil {
			return err
		}
	}
	return w.Flush(ctx)
}

// packedAt is where a block lies in a list of packs.
type packedAt struct {
	hi, lo uint64 // the first 16 bytes of its CID, zero-padded
	pack   int
	off    int
}

// keyOrder returns where the blocks of packs lie, in the order of their
// CIDs' bytes. It sorts the first 16 bytes of each key, side by side in
// one slice, and compares whole keys only on a tie: comparing the keys
// where they lie, all over the heap, missed the processor's cache at
// nearly every step, and a commit of 600,000 blocks spent a second
// sorting them.
func keyOrder(packs []cas.Packed) []packedAt {
	n := 0
	for _, p := range packs {
		n += p.Len()
	}
	order := make([]packedAt, 0, n)
	for i, p := range packs {
		for off := 0; ; {
			key, next, ok := p.Next(off)
			if !ok {
				break
			}
			var k [16]byte
			copy(k[:], key)
			order = append(order, packedAt{binary.BigEndian.Uint64(k[:8]), binary.BigEndian.Uint64(k[8:]), i, off})
			off = next
		}
	}
	slices.SortFunc(order, func(a, b packedAt) int {
		if c := cmp.Compare(a.hi, b.hi); c != 0 {
			return c
		}
		if c := cmp.Compare(a.lo, b.lo); c != 0 {
			return c
		}
		ka, _, _ := packs[a.pack].Next(a.off)
		kb, _, _ := packs[b.pack].Next(b.off)
		return bytes.Compare(ka, kb)
	})
	return order
}

// encodeRecord encodes the pages of the run record that changed since the
// last call and returns them with the ref to the record's new root. The
// caller holds e.mu.
func (e *execution) encodeRecord(ctx context.Context) ([]cas.Block, cas.Ref, error) {
	if e.pages == nil {
		e.pages = &pageCache{}
		e.pages.markAll(len(e.rec.Nodes))
	}
	blocks, root, err := encodeRecord(ctx, e.rec, e.pages)
	if err != nil {
		return nil, cas.Ref{}, err
	}
	return blocks, cas.Ref{NS: RefNamespace, Name: e.rec.Run, CID: root}, nil
}

// saveRecord stores the run record. The caller holds e.mu.
func (e *execution) saveRecord(ctx context.Context, st cas.Store) error {
	blocks, ref, err := e.encodeRecord(ctx)
	if err != nil {
		return err
	}
	if err := st.Put(ctx, blocks...); err != nil {
		return err
	}
	return st.SetRefs(ctx, ref)
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

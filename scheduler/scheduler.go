package scheduler

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"fmt"
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

// PutPacked keeps the store's own bulk put, if it has one.
func (n noClose) PutPacked(ctx context.Context, packs ...cas.Packed) error {
	return cas.PutPacked(ctx, n.Store, packs...)
}

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
			if c, err = haygent.PutPackage(ctx, stg, pkg.Dir, s.opts.StoreDir); err != nil {
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
		Decisions: plan.Decisions, Trusted: trustedKeys(nil, s.opts.Trusted)}
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

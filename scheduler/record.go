package scheduler

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"slices"
	"sort"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/ipfs/go-cid"
)

// Type names.
const (
	TypeRun        = "hg/run@1"
	TypeAcceptance = "hg/acceptance@1"
	RefNamespace   = "runs" // runs/RUN -> the latest hg/run@1
	MemoNamespace  = "memo" // memo/KEY -> the accepted hg/acceptance@1
	VerifierName   = "hg-scheduler/1"
)

// Run statuses.
const (
	StatusRunning   = "running"
	StatusDone      = "done"      // the outcome holds
	StatusHalted    = "halted"    // a required node cannot be done
	StatusCancelled = "cancelled" // stopped on request
)

// Record is the state of one run of a Work Order (hg/run@1).
type Record struct {
	Type      string       `cbor:"type"`
	Run       string       `cbor:"run"`
	WorkOrder cas.Link     `cbor:"workorder"`
	Name      string       `cbor:"name"`
	Objective string       `cbor:"objective"`
	Status    string       `cbor:"status"`
	Reason    string       `cbor:"reason"`
	Started   string       `cbor:"started"`
	Updated   string       `cbor:"updated"`
	Nodes     []NodeRecord `cbor:"nodes"` // sorted by name
	// Class is the task class whose belief log the decisions came from
	// and go back to; Decisions, how the run's decision slots were
	// bound before it started (none for an order without decisions).
	Class     string        `cbor:"class,omitempty"`
	Decisions []DecisionRec `cbor:"decisions,omitempty"`
	// Trusted are the runner keys whose receipts the run accepted, in
	// their text form ("ed25519:..."), sorted: its own runner key, the
	// store's trusted keys and any given for the run (hg run --trust), of
	// every process that executed it. Information: hg verify trusts only
	// the keys its user gives it. Left out of records made before it
	// existed, which keep their CIDs.
	Trusted []string `cbor:"trusted,omitempty"`
	// Events are what moved nodes outside the scheduler's forward moves,
	// oldest first: circuit breakers opened and reset, re-measurements
	// that regressed a node, nodes rewritten or deleted by a person (see
	// [RunEvent]). They are stored apart from the record's root, in a
	// chain of blocks that only grows.
	Events []RunEvent `cbor:"-"`

	eventsHead   *cas.Link // the newest stored block of Events
	eventsStored int       // how many of Events that chain holds
}

// DecisionRec is how one decision slot of a run was bound: the question,
// whether it was put to someone, the value and where it came from.
type DecisionRec struct {
	Slot     string `cbor:"slot"`
	Question string `cbor:"question"`
	Critical bool   `cbor:"critical"`
	Asked    bool   `cbor:"asked"`
	// Source is "belief" (the class's belief log, Event the event that
	// bound it), "terminal" or "file" (asked), "default", or "" when
	// nothing bound a slot that is not critical.
	Source string    `cbor:"source"`
	Value  any       `cbor:"value"`
	Event  *cas.Link `cbor:"event,omitempty"`
}

// NodeRecord is one node's state within a run.
type NodeRecord struct {
	Name       string    `cbor:"name"`
	State      string    `cbor:"state"`
	Attempts   int64     `cbor:"attempts"`
	Memo       bool      `cbor:"memo"`
	Receipt    *cas.Link `cbor:"receipt,omitempty"`
	Acceptance *cas.Link `cbor:"acceptance,omitempty"`
	BlockedBy  *cas.Link `cbor:"blocked_by,omitempty"` // the HALT receipt upstream
	Reason     string    `cbor:"reason"`
	// Earlier holds the receipts of earlier attempts, oldest first: those
	// that failed before a retry (hg resume --retry), and accepted ones
	// that a regression took back before the node ran again.
	Earlier []cas.Link `cbor:"earlier,omitempty"`
	// Breaker is true while the node's circuit breaker is open: it was
	// started as many times as its limit allows since BreakerBase (its
	// attempts when the breaker was last reset; 0 if never), and only
	// hg breaker reset lets it run again.
	Breaker     bool  `cbor:"breaker,omitempty"`
	BreakerBase int64 `cbor:"breaker_base,omitempty"`
}

// Acceptance verdicts ([Acceptance].Verdict).
const (
	Accepted = "accepted"
	Rejected = "rejected"
)

// Acceptance is the scheduler's independent check of a receipt.
type Acceptance struct {
	Type     string     `cbor:"type"`
	Receipt  cas.Link   `cbor:"receipt"`
	Checks   []CheckRec `cbor:"checks"`
	Verdict  string     `cbor:"verdict"` // Accepted or Rejected
	Status   string     `cbor:"status"`  // the receipt's: PASS or HALT
	Verifier string     `cbor:"verifier"`
	At       string     `cbor:"at"`
}

// CheckRec is one check of an acceptance.
type CheckRec struct {
	Name   string `cbor:"name"`
	OK     bool   `cbor:"ok"`
	Detail string `cbor:"detail"`
}

// node returns the record of the named node.
func (r *Record) node(name string) *NodeRecord {
	i := sort.Search(len(r.Nodes), func(i int) bool { return r.Nodes[i].Name >= name })
	if i < len(r.Nodes) && r.Nodes[i].Name == name {
		return &r.Nodes[i]
	}
	return nil
}

// pageSize is how many node records one page of a stored run record
// holds. A commit rewrites only the pages whose nodes changed, so its cost
// follows the work done since the last commit, not the size of the run.
const pageSize = 512

// TypeRunPage is one page of node records of a stored run.
const TypeRunPage = "hg/runpage@1"

// storedRecord is the root block of a stored run record: the record's own
// fields and links to its pages of node records, in name order.
type storedRecord struct {
	Type      string        `cbor:"type"`
	Run       string        `cbor:"run"`
	WorkOrder cas.Link      `cbor:"workorder"`
	Name      string        `cbor:"name"`
	Objective string        `cbor:"objective"`
	Status    string        `cbor:"status"`
	Reason    string        `cbor:"reason"`
	Started   string        `cbor:"started"`
	Updated   string        `cbor:"updated"`
	Nodes     int64         `cbor:"nodes"`
	Pages     []cas.Link    `cbor:"pages"`
	Class     string        `cbor:"class,omitempty"`
	Decisions []DecisionRec `cbor:"decisions,omitempty"`
	Events    *cas.Link     `cbor:"events,omitempty"` // the newest hg/runevents@1
	Trusted   []string      `cbor:"trusted,omitempty"`
}

type runPage struct {
	Type  string       `cbor:"type"`
	Nodes []NodeRecord `cbor:"nodes"`
}

// pageCache remembers the stored pages of a record, so unchanged ones are
// not encoded again.
type pageCache struct {
	links []cas.Link
	dirty map[int]bool // pages changed since they were last stored
}

func (c *pageCache) markAll(n int) {
	c.links = make([]cas.Link, (n+pageSize-1)/pageSize)
	c.dirty = map[int]bool{}
	for i := range c.links {
		c.dirty[i] = true
	}
}

// encodeRecord returns the new blocks of a record and its root. With a
// cache, only dirty pages are encoded.
func encodeRecord(ctx context.Context, rec *Record, cache *pageCache) ([]cas.Block, cid.Cid, error) {
	if cache == nil {
		cache = &pageCache{}
		cache.markAll(len(rec.Nodes))
	}
	var blocks []cas.Block
	for i := range cache.links {
		if !cache.dirty[i] {
			continue
		}
		end := min((i+1)*pageSize, len(rec.Nodes))
		data, err := cas.Marshal(&runPage{Type: TypeRunPage, Nodes: rec.Nodes[i*pageSize : end]})
		if err != nil {
			return nil, cid.Undef, err
		}
		b := cas.NewBlock(cas.DagCBOR, data)
		blocks = append(blocks, b)
		cache.links[i] = cas.Link{Cid: b.CID()}
	}
	clear(cache.dirty)
	if len(rec.Events) > rec.eventsStored {
		eb, head, err := encodeEvents(rec.Run, rec.Events[rec.eventsStored:], rec.eventsHead)
		if err != nil {
			return nil, cid.Undef, err
		}
		blocks = append(blocks, eb...)
		rec.eventsHead, rec.eventsStored = head, len(rec.Events)
	}
	root := storedRecord{Type: rec.Type, Run: rec.Run, WorkOrder: rec.WorkOrder, Name: rec.Name, Objective: rec.Objective,
		Status: rec.Status, Reason: rec.Reason, Started: rec.Started, Updated: rec.Updated,
		Nodes: int64(len(rec.Nodes)), Pages: append([]cas.Link{}, cache.links...),
		Class: rec.Class, Decisions: rec.Decisions, Events: rec.eventsHead, Trusted: rec.Trusted}
	data, err := cas.Marshal(&root)
	if err != nil {
		return nil, cid.Undef, err
	}
	if len(data) > cas.MaxBlockSize {
		return nil, cid.Undef, fmt.Errorf("run %s: record of %d pages is too large", rec.Run, len(root.Pages))
	}
	b := cas.NewBlock(cas.DagCBOR, data)
	return append(blocks, b), b.CID(), nil
}

// LoadRecord reads the latest record of a run.
func LoadRecord(ctx context.Context, st cas.Store, run string) (*Record, cid.Cid, error) {
	c, err := st.GetRef(ctx, RefNamespace, run)
	if err != nil {
		return nil, cid.Undef, fmt.Errorf("run %s: %w", run, err)
	}
	rec, err := LoadRecordAt(ctx, st, c)
	if err != nil {
		return nil, cid.Undef, fmt.Errorf("run %s: %w", run, err)
	}
	return rec, c, nil
}

// LoadWorkOrder reads the Work Order a run record names, as stored
// (package trees by CID) and as a [dag.WorkOrder]. One over the block
// limit is stored under an envelope ([cas.GetObject]).
func LoadWorkOrder(ctx context.Context, st cas.Store, rec *Record) (dag.Object, *dag.WorkOrder, error) {
	var obj dag.Object
	if err := cas.GetObject(ctx, st, rec.WorkOrder.Cid, &obj); err != nil {
		return obj, nil, err
	}
	wo, err := dag.FromObject(obj)
	return obj, wo, err
}

// LoadRecordAt reads the run record whose root is c, as a bundle holds it.
func LoadRecordAt(ctx context.Context, st cas.Store, c cid.Cid) (*Record, error) {
	var root storedRecord
	if err := st.View(ctx, c, func(d []byte) error { return cas.Unmarshal(d, &root) }); err != nil {
		return nil, fmt.Errorf("record %s: %w", c, err)
	}
	if root.Type != TypeRun {
		return nil, fmt.Errorf("%s is not a run record: %w", c, cas.ErrInvalid)
	}
	rec := &Record{Type: root.Type, Run: root.Run, WorkOrder: root.WorkOrder, Name: root.Name, Objective: root.Objective,
		Status: root.Status, Reason: root.Reason, Started: root.Started, Updated: root.Updated,
		Class: root.Class, Decisions: root.Decisions, Trusted: root.Trusted}
	for _, p := range root.Pages {
		var page runPage
		if err := st.View(ctx, p.Cid, func(d []byte) error { return cas.Unmarshal(d, &page) }); err != nil {
			return nil, fmt.Errorf("record page %s: %w", p, err)
		}
		if page.Type != TypeRunPage {
			return nil, fmt.Errorf("%s is not a record page: %w", p, cas.ErrInvalid)
		}
		rec.Nodes = append(rec.Nodes, page.Nodes...)
	}
	if root.Events != nil {
		evs, err := loadEvents(ctx, st, rec.Run, root.Events.Cid)
		if err != nil {
			return nil, fmt.Errorf("record %s: %w", c, err)
		}
		rec.Events, rec.eventsHead, rec.eventsStored = evs, root.Events, len(evs)
	}
	strictlySorted := true
	for i := 1; i < len(rec.Nodes); i++ {
		strictlySorted = strictlySorted && rec.Nodes[i-1].Name < rec.Nodes[i].Name
	}
	if int64(len(rec.Nodes)) != root.Nodes || !strictlySorted {
		return nil, fmt.Errorf("record %s: pages hold %d nodes out of order, repeated, or where %d were recorded: %w", c, len(rec.Nodes), root.Nodes, cas.ErrInvalid)
	}
	return rec, nil
}

// trustedKeys adds keys, in their text form, to a record's sorted list
// of trusted keys, each once.
func trustedKeys(have []string, keys []ed25519.PublicKey) []string {
	out := slices.Clone(have)
	for _, k := range keys {
		if len(k) != ed25519.PublicKeySize {
			continue
		}
		out = append(out, ledger.FormatPublicKey(k))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

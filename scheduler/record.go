package scheduler

import (
	"bytes"
	"context"
	"fmt"
	"sort"

	"github.com/haygent/hg/cas"
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
}

// Acceptance is the scheduler's independent check of a receipt.
type Acceptance struct {
	Type     string     `cbor:"type"`
	Receipt  cas.Link   `cbor:"receipt"`
	Checks   []CheckRec `cbor:"checks"`
	Verdict  string     `cbor:"verdict"` // accepted, rejected
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

// recordInline is the largest record stored as one block; larger ones are
// stored as a file.
const recordInline = 1 << 20

// encodeRecord returns the blocks of a record and its root: one block, or
// for a large run, the record's bytes as an hg/file@1.
func encodeRecord(ctx context.Context, rec *Record) ([]cas.Block, cid.Cid, error) {
	data, err := cas.Marshal(rec)
	if err != nil {
		return nil, cid.Undef, err
	}
	if len(data) <= recordInline {
		b := cas.NewBlock(cas.DagCBOR, data)
		return []cas.Block{b}, b.CID(), nil
	}
	st := newStaging()
	c, _, err := cas.PutFile(ctx, st, bytes.NewReader(data), nil)
	if err != nil {
		return nil, cid.Undef, err
	}
	return st.blocks(), c, nil
}

// LoadRecord reads the latest record of a run.
func LoadRecord(ctx context.Context, st cas.Store, run string) (*Record, cid.Cid, error) {
	c, err := st.GetRef(ctx, RefNamespace, run)
	if err != nil {
		return nil, cid.Undef, fmt.Errorf("run %s: %w", run, err)
	}
	var data []byte
	info, err := cas.Stat(ctx, st, c)
	if err != nil {
		return nil, cid.Undef, err
	}
	if info.Type == cas.TypeFile {
		var buf bytes.Buffer
		if _, err := cas.ReadFile(ctx, st, c, &buf, nil); err != nil {
			return nil, cid.Undef, err
		}
		data = buf.Bytes()
	} else if data, err = st.Get(ctx, c); err != nil {
		return nil, cid.Undef, err
	}
	var rec Record
	if err := cas.Unmarshal(data, &rec); err != nil {
		return nil, cid.Undef, fmt.Errorf("run %s: record %s: %w", run, c, err)
	}
	if rec.Type != TypeRun {
		return nil, cid.Undef, fmt.Errorf("run %s: %s is not a run record: %w", run, c, cas.ErrInvalid)
	}
	return &rec, c, nil
}

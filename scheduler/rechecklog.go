package scheduler

import (
	"context"
	"errors"
	"fmt"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// The recheck log: every re-measurement of a run (hg recheck), whatever
// it found, so that what was measured and held is known as well as what
// regressed (which the run's events record).
const (
	TypeRecheck       = "hg/recheck@1"
	RecheckNamespace  = "rechecks" // rechecks/RUN -> the run's newest hg/recheck@1
	maxRecheckEntries = 1024       // node entries per block, far below the block limit
)

// Results of a node in a [Recheck].
const (
	RecheckHolds     = "holds"     // every check held (and its replay agreed)
	RecheckRegressed = "regressed" // a check no longer holds: see the run's regressed event
	RecheckBlocked   = "blocked"   // below a node that regressed: not measured on its own
)

// Recheck is one re-measurement of a run, or a part of one: a
// re-measurement of more nodes than one block holds is stored as several,
// chained by Prior, with the same Record and At.
type Recheck struct {
	Type    string         `cbor:"type"`
	Run     string         `cbor:"run"`
	Record  cas.Link       `cbor:"record"` // the record measured
	At      string         `cbor:"at"`     // RFC 3339, the measuring process's clock
	Who     string         `cbor:"who"`
	Key     string         `cbor:"key,omitempty"` // the runner key of the store it was made from
	Trusted []string       `cbor:"trusted"`       // the keys measured under, "ed25519:...", sorted
	Replay  bool           `cbor:"replay"`        // whether done nodes that held were replayed
	Nodes   []RecheckEntry `cbor:"nodes"`
	Prior   *cas.Link      `cbor:"prior,omitempty"` // the block recorded before this one
}

// RecheckEntry is one done node's outcome in a [Recheck].
type RecheckEntry struct {
	Node    string   `cbor:"node"`
	Receipt cas.Link `cbor:"receipt"`
	Result  string   `cbor:"result"`
	Check   string   `cbor:"check,omitempty"` // regressed: the check that failed, or "replay"
	// Replay is the replay's outcome, for a node replayed.
	Replay *RecheckReplay `cbor:"replay,omitempty"`
}

// RecheckReplay is how a replay compared: transitions that agreed, of how
// many, and whether it diverged.
type RecheckReplay struct {
	Agree       int64 `cbor:"agree"`
	Transitions int64 `cbor:"transitions"`
	Diverged    bool  `cbor:"diverged"`
}

// RecordRecheck appends r (its Type and Prior set here) to the run's
// recheck log and moves the ref rechecks/RUN to it. The caller holds the
// run's lock, so that no other process appends at once.
func RecordRecheck(ctx context.Context, st cas.Store, r Recheck) (cid.Cid, error) {
	if err := CheckRunID(r.Run); err != nil {
		return cid.Undef, err
	}
	var prior *cas.Link
	switch c, err := st.GetRef(ctx, RecheckNamespace, r.Run); {
	case err == nil:
		prior = &cas.Link{Cid: c}
	case !errors.Is(err, cas.ErrNotFound):
		return cid.Undef, err
	}
	nodes := r.Nodes
	var blocks []cas.Block
	for first := true; first || len(nodes) > 0; first = false {
		part := r
		part.Type, part.Prior = TypeRecheck, prior
		part.Nodes = nodes[:min(len(nodes), maxRecheckEntries)]
		nodes = nodes[len(part.Nodes):]
		if part.Trusted == nil {
			part.Trusted = []string{}
		}
		data, err := cas.Marshal(&part)
		if err != nil {
			return cid.Undef, err
		}
		if len(data) > cas.MaxBlockSize {
			return cid.Undef, fmt.Errorf("run %s: recheck of %d nodes is too large", r.Run, len(part.Nodes))
		}
		b := cas.NewBlock(cas.DagCBOR, data)
		blocks = append(blocks, b)
		prior = &cas.Link{Cid: b.CID()}
	}
	if err := st.Put(ctx, blocks...); err != nil {
		return cid.Undef, err
	}
	if err := st.SetRef(ctx, RecheckNamespace, r.Run, prior.Cid); err != nil {
		return cid.Undef, err
	}
	return prior.Cid, nil
}

// Rechecks reads the recheck log of run, oldest block first; none for a
// run never rechecked (or rechecked before the log existed). A block
// that is not a recheck of run is an error wrapping [cas.ErrInvalid].
func Rechecks(ctx context.Context, st cas.Store, run string) ([]Recheck, error) {
	head, err := st.GetRef(ctx, RecheckNamespace, run)
	if errors.Is(err, cas.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Recheck
	for c := &head; c != nil; {
		var r Recheck
		if err := st.View(ctx, *c, func(d []byte) error { return cas.Unmarshal(d, &r) }); err != nil {
			return nil, fmt.Errorf("recheck %s: %w", *c, err)
		}
		if r.Type != TypeRecheck || r.Run != run {
			return nil, fmt.Errorf("%s is not a recheck of run %s: %w", *c, run, cas.ErrInvalid)
		}
		out = append(out, r)
		if r.Prior != nil {
			c = &r.Prior.Cid
		} else {
			c = nil
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

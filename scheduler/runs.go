package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
	"github.com/ipfs/go-cid"
)

// RunInfo is what a list of runs shows of one run: read from the root of
// its record and a count of its nodes by state, never from anything but
// the record.
type RunInfo struct {
	Run       string  // the name of its ref, runs/RUN: what every command takes
	Record    cid.Cid // the record's root
	WorkOrder string  // the Work Order's name
	Order     cid.Cid // the stored Work Order
	Class     string
	Status    string
	Reason    string
	Started   string // RFC 3339, as recorded
	Updated   string
	Nodes     int64
	States    map[string]int64 // how many nodes are in each state
	Trusted   []string         // the keys the run trusted (Record.Trusted)
	// Err is why the record could not be read; then only Run and Record
	// are known. A run whose record cannot be read is still listed: its
	// id is never lost.
	Err error
}

// Done is how many of the run's nodes are done.
func (r *RunInfo) Done() int64 { return r.States[dag.Done] }

// StartedAt is when the run started, or the zero time when the record
// does not say in RFC 3339.
func (r *RunInfo) StartedAt() time.Time { return parseStamp(r.Started) }

// UpdatedAt is when the run's record last changed (its start if it never
// did), or the zero time when the record does not say in RFC 3339.
func (r *RunInfo) UpdatedAt() time.Time {
	if t := parseStamp(r.Updated); !t.IsZero() {
		return t
	}
	return r.StartedAt()
}

func parseStamp(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// ListRuns returns every run of the store (every ref runs/RUN), newest
// first by start time; runs whose record cannot be read, or says no start
// time, come last, by id. An error is returned only when the refs
// themselves cannot be listed.
func ListRuns(ctx context.Context, st cas.Store) ([]RunInfo, error) {
	refs, err := st.Refs(ctx, RefNamespace)
	if err != nil {
		return nil, err
	}
	out := make([]RunInfo, 0, len(refs))
	for _, r := range refs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out = append(out, runInfoOf(ctx, st, r.Name, r.CID))
	}
	sort.SliceStable(out, func(i, j int) bool {
		ti, tj := out[i].StartedAt(), out[j].StartedAt()
		if ti.IsZero() != tj.IsZero() {
			return tj.IsZero()
		}
		if !ti.Equal(tj) {
			return ti.After(tj)
		}
		return out[i].Run > out[j].Run
	})
	return out, nil
}

// RunSummary reads the run info of one run by its id.
func RunSummary(ctx context.Context, st cas.Store, run string) (RunInfo, error) {
	c, err := st.GetRef(ctx, RefNamespace, run)
	if err != nil {
		return RunInfo{}, fmt.Errorf("run %s: %w", run, err)
	}
	return runInfoOf(ctx, st, run, c), nil
}

// runInfoOf reads a record's root and pages and counts its nodes by
// state; what it cannot read is the info's Err.
func runInfoOf(ctx context.Context, st cas.Store, run string, c cid.Cid) RunInfo {
	info := RunInfo{Run: run, Record: c}
	var root storedRecord
	if err := st.View(ctx, c, func(d []byte) error { return cas.Unmarshal(d, &root) }); err != nil {
		info.Err = fmt.Errorf("record %s: %w", c, err)
		return info
	}
	if root.Type != TypeRun {
		info.Err = fmt.Errorf("%s is not a run record: %w", c, cas.ErrInvalid)
		return info
	}
	states := map[string]int64{}
	var n int64
	for _, p := range root.Pages {
		var page runPage
		if err := st.View(ctx, p.Cid, func(d []byte) error { return cas.Unmarshal(d, &page) }); err != nil {
			info.Err = fmt.Errorf("record page %s: %w", p.Cid, err)
			return info
		}
		if page.Type != TypeRunPage {
			info.Err = fmt.Errorf("%s is not a record page: %w", p.Cid, cas.ErrInvalid)
			return info
		}
		for _, nr := range page.Nodes {
			states[nr.State]++
		}
		n += int64(len(page.Nodes))
	}
	if n != root.Nodes {
		info.Err = fmt.Errorf("record %s: pages hold %d nodes where %d were recorded: %w", c, n, root.Nodes, cas.ErrInvalid)
		return info
	}
	info.WorkOrder, info.Order, info.Class = root.Name, root.WorkOrder.Cid, root.Class
	info.Trusted = root.Trusted
	info.Status, info.Reason, info.Started, info.Updated = root.Status, root.Reason, root.Started, root.Updated
	info.Nodes, info.States = root.Nodes, states
	return info
}

// ErrActive is returned for a run recorded running: a process may be
// executing it, or one that did died and 'hg resume' would go on.
var ErrActive = errors.New("the run is recorded running")

// Removed is what [RemoveRun] removed, and what of it stays.
type Removed struct {
	RunInfo
	// Receipts is how many receipts the record named (every node's, and
	// the earlier attempts'); MemoHeld, how many of its acceptances are
	// memo entries, which keep them and their receipts until the entries
	// go too ([RemoveMemo]).
	Receipts int
	MemoHeld int
	// CancelRequest is true when a pending cancel request (ref
	// cancel/RUN) was removed with the run.
	CancelRequest bool
}

// RemoveOptions tune [RemoveRun].
type RemoveOptions struct {
	// Force removes a run recorded running, or one whose record cannot
	// be read.
	Force bool
	// DryRun checks and counts as a removal would and removes nothing.
	DryRun bool
}

// RemoveRun removes a run from the store: the refs runs/RUN, cancel/RUN
// and rechecks/RUN. Nothing else is touched: the blocks of its record, its
// receipts and its acceptances stay until gc finds that no pin, other run
// or memo entry reaches them. A run recorded running is refused
// ([ErrActive]) unless forced, and so is one whose record cannot be read
// (its ref is then removed when forced). The caller makes sure that no
// process executes the run meanwhile (hg holds its lock, active/RUN).
func RemoveRun(ctx context.Context, st cas.Store, run string, opts RemoveOptions) (*Removed, error) {
	force := opts.Force
	info, err := RunSummary(ctx, st, run)
	if err != nil {
		return nil, err
	}
	rm := &Removed{RunInfo: info}
	switch {
	case info.Err != nil && !force:
		return nil, fmt.Errorf("run %s: its record cannot be read (%w); --force removes its ref anyway", run, info.Err)
	case info.Status == StatusRunning && !force:
		return nil, fmt.Errorf("run %s: %w (a process may be executing it, or one died and 'hg resume %s' would go on); --force removes it", run, ErrActive, run)
	}
	if info.Err == nil {
		rec, err := LoadRecordAt(ctx, st, info.Record)
		if err != nil && !force {
			return nil, fmt.Errorf("run %s: %w; --force removes its ref anyway", run, err)
		}
		if err == nil {
			memo, err := memoAcceptances(ctx, st)
			if err != nil {
				return nil, err
			}
			for _, n := range rec.Nodes {
				rm.Receipts += len(n.Earlier)
				if n.Receipt != nil {
					rm.Receipts++
				}
				if n.Acceptance != nil && memo[n.Acceptance.Cid] {
					rm.MemoHeld++
				}
			}
		}
	}
	if opts.DryRun {
		_, err := st.GetRef(ctx, CancelNamespace, run)
		rm.CancelRequest = err == nil
		return rm, nil
	}
	// The cancel request first: it names a record of the run, and must
	// not outlive the run's ref if this stops half way.
	switch err := st.DeleteRef(ctx, CancelNamespace, run); {
	case err == nil:
		rm.CancelRequest = true
	case !errors.Is(err, cas.ErrNotFound):
		return nil, fmt.Errorf("remove the cancel request of %s: %w", run, err)
	}
	// The recheck log too: it links records and receipts of the run.
	if err := st.DeleteRef(ctx, RecheckNamespace, run); err != nil && !errors.Is(err, cas.ErrNotFound) {
		return nil, fmt.Errorf("remove the recheck log of %s: %w", run, err)
	}
	if err := st.DeleteRef(ctx, RefNamespace, run); err != nil {
		return nil, fmt.Errorf("remove run %s: %w", run, err)
	}
	return rm, nil
}

// memoAcceptances is the set of acceptances the memo entries name.
func memoAcceptances(ctx context.Context, st cas.Store) (map[cid.Cid]bool, error) {
	refs, err := st.Refs(ctx, MemoNamespace)
	if err != nil {
		return nil, err
	}
	set := make(map[cid.Cid]bool, len(refs))
	for _, r := range refs {
		set[r.CID] = true
	}
	return set, nil
}

// MemoEntry is one entry of the memo cache: its key, the acceptance it
// names and when that acceptance was made.
type MemoEntry struct {
	Key        string
	Acceptance cid.Cid
	Receipt    cid.Cid
	At         string // RFC 3339, as the acceptance records it
	// Err is why the acceptance could not be read; the entry is still
	// listed.
	Err error
}

// AcceptedAt is when the entry's acceptance was made, or the zero time
// when it does not say in RFC 3339.
func (m *MemoEntry) AcceptedAt() time.Time { return parseStamp(m.At) }

// MemoEntries lists the memo cache, by key.
func MemoEntries(ctx context.Context, st cas.Store) ([]MemoEntry, error) {
	refs, err := st.Refs(ctx, MemoNamespace)
	if err != nil {
		return nil, err
	}
	out := make([]MemoEntry, 0, len(refs))
	for _, r := range refs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m := MemoEntry{Key: r.Name, Acceptance: r.CID}
		var acc Acceptance
		switch err := st.View(ctx, r.CID, func(d []byte) error { return cas.Unmarshal(d, &acc) }); {
		case err != nil:
			m.Err = fmt.Errorf("acceptance %s: %w", r.CID, err)
		case acc.Type != TypeAcceptance:
			m.Err = fmt.Errorf("%s is not an acceptance: %w", r.CID, cas.ErrInvalid)
		default:
			m.Receipt, m.At = acc.Receipt.Cid, acc.At
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// RemoveMemo removes memo entries by key: the work they name is done again
// by the next run that needs it. An entry already gone is not an error.
func RemoveMemo(ctx context.Context, st cas.Store, keys ...string) error {
	for _, k := range keys {
		if err := st.DeleteRef(ctx, MemoNamespace, k); err != nil && !errors.Is(err, cas.ErrNotFound) {
			return fmt.Errorf("remove memo entry %s: %w", k, err)
		}
	}
	return nil
}

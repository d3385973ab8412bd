package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/verify"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
)

// checkLatest is the check hg verify adds for a run record named by its
// CID (or a pin), and that hg attest requires of every record: the
// record is its run's latest in this store, the one the ref runs/RUN
// names. An older record still says what its run was before a recheck
// regressed a node or a person withdrew one.
const checkLatest = "latest record"

// latestOf returns the CID of run's latest record in st (the ref
// runs/RUN), or cid.Undef when st has no such run: a record imported
// from a bundle, or one made up under an id this store never ran.
func latestOf(ctx context.Context, st cas.Store, run string) (cid.Cid, error) {
	c, err := st.GetRef(ctx, scheduler.RefNamespace, run)
	if errors.Is(err, cas.ErrNotFound) {
		return cid.Undef, nil
	}
	return c, err
}

// latestRecord is the check "latest record" of the record c of run: it
// fails when the ref runs/RUN names another record; when st has no such
// run it holds, and its detail says the record is verified alone, as it
// would be from a bundle. err is only for the store.
func latestRecord(ctx context.Context, st cas.Store, run string, c cid.Cid) (verify.Check, error) {
	chk := verify.Check{Name: checkLatest}
	latest, err := latestOf(ctx, st, run)
	switch {
	case err != nil:
		return chk, err
	case !latest.Defined():
		chk.OK = true
		chk.Detail = fmt.Sprintf("run %s is not a run of this store (no ref %s/%s): the record is verified alone, as from a bundle", run, scheduler.RefNamespace, run)
	case latest != c:
		chk.Detail = fmt.Sprintf("record %s is not the latest record of run %s (%s is): 'hg verify %s' verifies the run as it stands", c, run, latest, run)
	default:
		chk.OK = true
		chk.Detail = fmt.Sprintf("the latest record of run %s", run)
	}
	return chk, nil
}

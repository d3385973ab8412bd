package main

import (
	"context"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/verify"
	"github.com/haygent/hg/scheduler"
)

// checkRegressed is the check hg verify RECEIPT and hg report RECEIPT
// add against a store: a receipt still verifies after a recheck found
// that its PASS no longer holds (under today's trust, or replayed), and
// the store's run records are where that finding is. A receipt that a
// run of the store regressed, or that is built from one, is not shown as
// holding.
const checkRegressed = "not regressed"

// markRegressed adds to each verification of vs (a receipt's chain,
// upstream first, the receipt last) whose receipt a run of st regressed a
// failed check checkRegressed naming where and why. The last, the
// receipt asked for, gets the check whatever: failed naming the first
// receipt upstream that regressed, or holding when none did.
func markRegressed(ctx context.Context, st cas.Store, vs []*verify.Verification) error {
	if len(vs) == 0 {
		return nil
	}
	regs, err := scheduler.Regressions(ctx, st)
	if err != nil {
		return err
	}
	last := vs[len(vs)-1]
	mark := verify.Check{Name: checkRegressed, OK: true, Detail: "no run of this store regressed it or a receipt upstream of it"}
	for _, v := range vs {
		g, ok, err := regs.Of(ctx, st, v.Receipt)
		if err != nil {
			return err
		}
		switch {
		case !ok:
		case v == last:
			mark = verify.Check{Name: checkRegressed, Detail: g.String() + ": a recheck found that this PASS no longer holds"}
		default:
			v.Checks = append(v.Checks, verify.Check{Name: checkRegressed, Detail: g.String() + ": a recheck found that this PASS no longer holds"})
			if mark.OK {
				mark = verify.Check{Name: checkRegressed, Detail: "upstream " + v.Receipt.String() + " " + g.String()}
			}
		}
	}
	last.Checks = append(last.Checks, mark)
	return nil
}

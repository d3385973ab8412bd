package dag

// Node states. See the package documentation for what each means.
const (
	Pending   = "pending"   // waiting for its needs
	Ready     = "ready"     // every need is done; the node may start
	Active    = "active"    // its Haygent is running
	Concluded = "concluded" // a receipt exists but is not yet accepted
	Done      = "done"      // the receipt was accepted; the output feeds downstream
	Blocked   = "blocked"   // it will never run: something upstream failed, or the scheduler stopped starting nodes
	Failed    = "failed"    // HALT, an invocation that could not run, or a refused receipt
	Cancelled = "cancelled" // the Work Order was stopped
)

// moves is the transition table: every move a node may make. A state
// with no entry is final.
//
//	from       to
//	pending    ready, blocked, cancelled
//	ready      active, blocked, cancelled
//	active     concluded, failed, cancelled
//	concluded  done, failed, cancelled
//	done       (final)
//	blocked    (final)
//	failed     (final)
//	cancelled  (final)
var moves = map[string][]string{
	Pending:   {Ready, Blocked, Cancelled},
	Ready:     {Active, Blocked, Cancelled},
	Active:    {Concluded, Failed, Cancelled},
	Concluded: {Done, Failed, Cancelled},
}

// CanMove reports whether a node in state from may move to state to. The
// table, and nothing else, allows:
//
//	pending    -> ready      its needs are all done
//	pending    -> blocked    a need failed, was blocked or was cancelled
//	ready      -> active     the scheduler started its Haygent
//	ready      -> blocked    the scheduler will not start it after all (it
//	                         stops starting nodes after a failure)
//	active     -> concluded  the invocation ended with a receipt
//	active     -> failed     the invocation could not run or end
//	concluded  -> done       the receipt is PASS, verified and accepted
//	concluded  -> failed     the receipt is HALT or was refused
//	pending, ready, active, concluded -> cancelled
//
// Done, blocked, failed and cancelled are final: no move leaves them. A
// state never moves to itself, and unknown states move nowhere. Concluded
// is not done: only an accepted receipt's output may feed other nodes.
func CanMove(from, to string) bool {
	for _, s := range moves[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Final reports whether state is one no move leaves: done, blocked,
// failed or cancelled.
func Final(state string) bool {
	switch state {
	case Done, Blocked, Failed, Cancelled:
		return true
	}
	return false
}

package dag

// Node states. See the package documentation for what each means.
const (
	Pending   = "pending"   // waiting for its needs
	Ready     = "ready"     // every need is done; the node may start
	Active    = "active"    // its Haygent is running
	Concluded = "concluded" // a receipt exists but is not yet accepted
	Done      = "done"      // the receipt was accepted; the output feeds downstream
	Blocked   = "blocked"   // it will never run: something upstream failed, or the scheduler stopped starting nodes
	Failed    = "failed"    // HALT, an invocation that could not run, a refused receipt, or a re-measurement that no longer holds
	Cancelled = "cancelled" // the Work Order was stopped
	Rewritten = "rewritten" // its work was superseded by a later accepted receipt, which a person named
	Deleted   = "deleted"   // withdrawn by a person, who said why
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
//	rewritten  (final)
//	deleted    (final)
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
//	                         stops starting nodes after a failure, or the
//	                         node's circuit breaker is open)
//	active     -> concluded  the invocation ended with a receipt
//	active     -> failed     the invocation could not run or end
//	concluded  -> done       the receipt is PASS, verified and accepted
//	concluded  -> failed     the receipt is HALT or was refused
//	pending, ready, active, concluded -> cancelled
//
// Done, blocked, failed, cancelled, rewritten and deleted are final: no
// move of the scheduler leaves them. A state never moves to itself, and
// unknown states move nowhere. Concluded is not done: only an accepted
// receipt's output may feed other nodes. The moves that take a final
// state back are [CanReopen]'s, and only a recorded event makes them.
func CanMove(from, to string) bool {
	for _, s := range moves[from] {
		if s == to {
			return true
		}
	}
	return false
}

// reopens is the table of the moves that only an event recorded in the
// run makes: a re-measurement, or a person's decision.
var reopens = map[string][]string{
	Done:      {Failed, Blocked, Rewritten, Deleted},
	Failed:    {Rewritten, Deleted},
	Blocked:   {Rewritten, Deleted},
	Cancelled: {Rewritten, Deleted},
	Pending:   {Rewritten, Deleted},
	Ready:     {Rewritten, Deleted},
	Active:    {Rewritten, Deleted},
	Concluded: {Rewritten, Deleted},
	Rewritten: {Deleted},
}

// CanReopen reports whether an event recorded in the run may move a node
// from state from to state to, where [CanMove] does not:
//
//	done       -> failed     a re-measurement of its receipt no longer holds
//	                         (regressed: today's trust refuses it, or its
//	                         replay diverges)
//	done       -> blocked    a node it needs regressed, was rewritten or was
//	                         deleted: its work rests on work that no longer
//	                         stands
//	any state but deleted -> rewritten, except rewritten itself: a person
//	                         named a later accepted receipt that supersedes
//	                         the node's work
//	any state but deleted -> deleted: a person withdrew the node, saying why
//
// Deleted is final for every table. Nothing moves a node to done except
// the scheduler's acceptance of a receipt.
func CanReopen(from, to string) bool {
	for _, s := range reopens[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Final reports whether state is one no move of the scheduler leaves:
// done, blocked, failed, cancelled, rewritten or deleted.
func Final(state string) bool {
	switch state {
	case Done, Blocked, Failed, Cancelled, Rewritten, Deleted:
		return true
	}
	return false
}

// Stops reports whether a node in state stops what depends on it from
// running: failed, blocked, rewritten and deleted do (their output is not
// one a downstream node may read), the others do not.
func Stops(state string) bool {
	switch state {
	case Failed, Blocked, Rewritten, Deleted:
		return true
	}
	return false
}

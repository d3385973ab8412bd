package main

import (
	"errors"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/boltstore"
	"github.com/haygent/hg/cas/unixfs"
	"github.com/haygent/hg/scheduler/natsengine"
)

// Exit codes. They are part of the contract with scripts: see docs/cli.md.
const (
	exitOK        = 0 // stored, PASS, verified, replay agreed
	exitError     = 1 // bad input, bad package, I/O, store busy
	exitUsage     = 2 // the command line itself is wrong
	exitHalt      = 3 // the work ended in a truthful failure
	exitIntegrity = 4 // a hash, chain, signature or canonical-form check failed
	exitNeedInput = 5 // clarification questions are unanswered
)

// usageError marks an error in the command line: exit 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// integrityError marks a finding (not a failure to look) that something
// stored is damaged, as fsck reports: exit 4.
type integrityError struct {
	msg  string
	hint string // what to do about it, if anything helps
}

func (e integrityError) Error() string { return e.msg }

// hinted is an error with a line of advice: exit 1.
type hinted struct {
	err  error
	hint string
}

func (e hinted) Error() string { return e.err.Error() }
func (e hinted) Unwrap() error { return e.err }

// exitCode maps an error to the process exit code. It is the only place
// that does.
func exitCode(err error) int {
	var (
		usage usageError
		integ integrityError
		halt  haltError
		need  needInputError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &usage):
		return exitUsage
	case errors.As(err, &halt):
		return exitHalt
	case errors.As(err, &need):
		return exitNeedInput
	case errors.As(err, &integ), errors.Is(err, cas.ErrCorrupt), errors.Is(err, cas.ErrNotCanonical), errors.Is(err, unixfs.ErrMalformed):
		return exitIntegrity
	default:
		return exitError
	}
}

// hintFor returns a line of advice for well-known errors, or "".
func hintFor(err error) string {
	var busy *cas.BusyError
	var integ integrityError
	var h hinted
	switch {
	case errors.As(err, &integ) && integ.hint != "":
		return integ.hint
	case errors.As(err, &h):
		return h.hint
	case errors.As(err, &busy):
		return "wait for it to finish, or stop it; HG_LOCK_TIMEOUT sets how long hg waits (0: as long as it takes)"
	case errors.Is(err, boltstore.ErrDamaged):
		return repairHint
	case errors.Is(err, natsengine.ErrNoJetStream):
		return "start the NATS server with JetStream: nats-server -js"
	case errors.Is(err, errNoStore):
		return "run 'hg init' to create a store here, or pass --store DIR or set HG_STORE"
	case errors.Is(err, cas.ErrCorrupt):
		return "run 'hg fsck' to list every damaged block"
	case errors.Is(err, cas.ErrBadCID):
		return "a CID looks like bafy... (see 'hg put' and 'hg pin ls')"
	}
	return ""
}

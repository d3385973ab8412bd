package perm

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers test for them with [errors.Is]; the values
// returned wrap them with the entry, path or operation they concern.
var (
	// ErrDenied is returned when an operation is not permitted: denied by
	// an entry, by default, or because its target is invalid.
	// [*DeniedError] wraps it.
	ErrDenied = errors.New("permission denied")

	// ErrInvalid is returned for a permissions file, grant, deny entry or
	// command that breaks the grammar. [*EntryError] wraps it.
	ErrInvalid = errors.New("invalid permissions")

	// ErrBadPath is returned by [CleanPath] and [ParseGlob] for a path or
	// pattern that is empty, absolute, holds a ".." segment, a backslash
	// or a NUL byte.
	ErrBadPath = errors.New("not a workspace-relative path")
)

// Rules that decide an operation no entry decided. They appear in
// [Decision.Rule] and [Denial.Rule] in place of an entry.
const (
	// RuleDefault: no grant allows the operation and no "none" grant of
	// its verb was written.
	RuleDefault = "default deny"

	// RuleInvalid prefixes the reason an operation's target was refused
	// before any entry was looked at: "invalid target: ...".
	RuleInvalid = "invalid target"
)

// EntryError reports a grant, deny entry or command that cannot be parsed.
// Where names it: "grants[2]", "deny[0]", `commands["go-test"]`, or
// "permissions.json" for the document as a whole.
type EntryError struct {
	Where  string
	Entry  string // the entry as written; empty for the document as a whole
	Reason string
}

func (e *EntryError) Error() string {
	if e.Entry == "" {
		return fmt.Sprintf("perm: %s: %s", e.Where, e.Reason)
	}
	return fmt.Sprintf("perm: %s %q: %s", e.Where, e.Entry, e.Reason)
}

// Unwrap returns [ErrInvalid].
func (e *EntryError) Unwrap() error { return ErrInvalid }

// Denial records one refused operation and the rule that refused it: a
// deny entry, a "none" grant, [RuleDefault], or a rule of the caller's (the
// workspace package adds "symlink"). It carries no time: the runtime stamps
// denials when it turns them into evidence.
type Denial struct {
	Op   Op     `json:"op"`
	Rule string `json:"rule"`
}

// DeniedError is the error for a refused operation. It unwraps to
// [ErrDenied].
type DeniedError struct {
	Op   Op
	Rule string
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("perm: %s denied (%s)", e.Op, e.Rule)
}

// Unwrap returns [ErrDenied].
func (e *DeniedError) Unwrap() error { return ErrDenied }

// Denial returns e as a [Denial].
func (e *DeniedError) Denial() Denial { return Denial{Op: e.Op, Rule: e.Rule} }

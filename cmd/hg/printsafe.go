package main

import "github.com/haygent/hg/internal/textsafe"

// printSafe writes a result to stdout as printf does, with every argument
// escaped (textsafe.Escape): text from a ledger, a store or a Work Order
// cannot clear, rewrite or add a line of what hg prints. The format is
// hg's own and is written as it is.
func (u *ui) printSafe(format string, args ...any) {
	textsafe.Fprintf(u.stdout, format, args...)
}

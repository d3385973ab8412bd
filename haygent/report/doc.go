// Package report renders a ledger for people: every line comes from the
// stored records, every string escaped, and the status line says what a
// reader must not miss (a failed verification, the receipt's limitations).
package report

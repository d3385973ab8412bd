// Package replay runs a receipt's Haygent again, with the slot answers the
// ledger recorded, on the workspace the receipt names, and compares the new
// ledger with the recorded one, field by field, time stamps aside: a
// divergence names the first transition and field that differ.
package replay

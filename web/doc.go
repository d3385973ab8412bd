// Package web is hg serve: a read-only view of a store in a browser. It
// lists runs, draws a run's DAG as SVG with each node's state (live while
// the run executes, by server-sent events), and shows a node's receipt
// with everything its ledger records, the workspace it left, the
// belief log of a task class, and the metrics of the store's runs
// (package metrics, computed when the page is served).
//
// Every receipt a page shows carries the verdict of hg's own verifier
// (haygent/verify), computed when the page is served against the store as
// it is then and the keys it trusts then: "verified", "signer not
// trusted", or "broken: " and the first check that failed. A receipt's
// PASS is shown only beside "verified"; an unverified receipt never reads
// PASS.
//
// The server never writes: it opens the store read-only for each request
// (Config.Open) and closes it before the response ends, so that a run in
// progress (which opens the store for one short transaction at a time)
// goes on. Every string from a ledger, a record or a belief log reaches
// the page through html/template, which escapes it for the context it
// lands in (text, attribute, URL, SVG). Stored files are served only as
// downloads (application/octet-stream, attachment), every response
// carries a Content-Security-Policy of default-src 'self' and nosniff,
// and a server that is not bound to loopback requires a token (guard.go).
//
// HTML, CSS and the one script (live updates) are embedded in the binary
// (assets/); pages work without script but for live updates.
package web

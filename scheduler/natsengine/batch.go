package natsengine

import "strings"

// What every batched message shares: invocations (invocations.go),
// outcomes (outcomes.go) and heartbeats (heartbeat.go) that name several
// invocations go on a subject whose last token is batch-TOKEN (TOKEN 32
// hex digits, also the message id of a stored one), where a message of
// one invocation has the invocation's id.

// batchToken starts the last subject token of a batched message.
const batchToken = "batch-"

// isBatchToken reports whether a subject's last token names several
// invocations rather than one.
func isBatchToken(token string) bool { return strings.HasPrefix(token, batchToken) }

// batchOverhead bounds the bytes a batch adds to its members' encodings,
// which it holds as they are: its map header, type and key, and the
// array's header.
const batchOverhead = 64

// batchLen is how many of the n bodies waiting, the first always, go in
// one batched message of at most max members and limit bytes; size(i) is
// the length of the i-th.
func batchLen(n, max, limit int, size func(i int) int) int {
	k, total := 1, batchOverhead+size(0)
	for k < n && k < max && total+size(k) <= limit {
		total += size(k)
		k++
	}
	return k
}

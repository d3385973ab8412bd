package boltstore

import "sync"

// writeBufs holds the buffers a Put gathers small blocks in, across
// Stores: a scheduler opens the store for each commit, and a buffer kept
// by one Store was made anew, doubling as it grew, by every commit.
var writeBufs sync.Pool // of *[]byte

// writeBufMax bounds the buffer a Put gathers small blocks in: a bigger
// batch is written in several calls, rather than copied whole into fresh
// memory first.
const writeBufMax = 4 << 20

// getWriteBuf returns an empty buffer that holds n bytes.
func getWriteBuf(n int) []byte {
	if p, ok := writeBufs.Get().(*[]byte); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]byte, 0, n)
}

// putWriteBuf keeps buf for a later Put, unless it is very large.
func putWriteBuf(buf []byte) {
	if cap(buf) <= writeBufMax {
		buf = buf[:0]
		writeBufs.Put(&buf)
	}
}

package memstore

import (
	"github.com/ipfs/go-cid"
)

// The blocks of a Store live in an arena: their bytes are appended to a
// few large byte chunks, and an index maps each CID to where its bytes
// are. Neither the chunks nor the index hold a pointer, so the garbage
// collector marks a store of a million blocks as a few hundred objects
// instead of scanning a million map entries and marking two million
// strings and slices. At 100,000 scheduler nodes this was most of the
// collector's work.

// key is a CID's binary form, its length first. Every CID hg makes fits;
// longer ones go to arena.long.
type key [40]byte

// loc is where a block's bytes are: chunk, offset, length.
type loc struct {
	chunk, off, n uint32
}

const (
	firstChunk = 4 << 10 // a small store stays small
	maxChunk   = 1 << 20
)

type arena struct {
	index  map[key]loc
	long   map[string]loc // CIDs too long for a key, by their bytes
	chunks [][]byte
	blocks []int // blocks alive in each chunk; a chunk without any is dropped
}

func newArena() arena {
	return arena{index: make(map[key]loc)}
}

func keyOf(c cid.Cid) (key, bool) {
	var k key
	s := c.KeyString()
	if len(s) >= len(k) {
		return k, false
	}
	k[0] = byte(len(s))
	copy(k[1:], s)
	return k, true
}

func (a *arena) find(c cid.Cid) (loc, bool) {
	if k, ok := keyOf(c); ok {
		l, found := a.index[k]
		return l, found
	}
	l, found := a.long[c.KeyString()]
	return l, found
}

func (a *arena) len() int { return len(a.index) + len(a.long) }

// data returns a block's bytes, capped so that nobody can append into the
// chunk behind them.
func (a *arena) data(l loc) []byte {
	return a.chunks[l.chunk][l.off : l.off+l.n : l.off+l.n]
}

// add copies data in unless c is already present. Bytes once written are
// never written again, so slices handed out by data stay valid and
// unchanged for as long as anyone holds them.
func (a *arena) add(c cid.Cid, data []byte) {
	k, short := keyOf(c)
	if short {
		if _, ok := a.index[k]; ok {
			return
		}
	} else if _, ok := a.long[c.KeyString()]; ok {
		return
	}
	l := a.place(data)
	if short {
		a.index[k] = l
		return
	}
	if a.long == nil {
		a.long = make(map[string]loc)
	}
	a.long[c.KeyString()] = l
}

// place appends data to the current chunk, starting a new one when it is
// full. Chunks double from 4 KiB to 1 MiB; a block of more than a quarter
// of that gets a chunk of its own.
func (a *arena) place(data []byte) loc {
	n := len(data)
	last := len(a.chunks) - 1
	if last < 0 || cap(a.chunks[last])-len(a.chunks[last]) < n {
		size := firstChunk
		if last >= 0 {
			size = min(2*cap(a.chunks[last]), maxChunk)
		}
		if n > maxChunk/4 {
			size = n
		}
		size = max(size, n)
		a.chunks = append(a.chunks, make([]byte, 0, size))
		a.blocks = append(a.blocks, 0)
		last++
	}
	ch := a.chunks[last]
	l := loc{chunk: uint32(last), off: uint32(len(ch)), n: uint32(n)}
	a.chunks[last] = append(ch, data...)
	a.blocks[last]++
	return l
}

// remove forgets c, and drops its chunk if no other block lives there and
// nothing is being appended to it.
func (a *arena) remove(c cid.Cid) {
	var l loc
	if k, ok := keyOf(c); ok {
		var found bool
		if l, found = a.index[k]; !found {
			return
		}
		delete(a.index, k)
	} else {
		var found bool
		if l, found = a.long[c.KeyString()]; !found {
			return
		}
		delete(a.long, c.KeyString())
	}
	a.blocks[l.chunk]--
	if a.blocks[l.chunk] == 0 && int(l.chunk) != len(a.chunks)-1 {
		a.chunks[l.chunk] = nil
	}
}

// each calls fn for every block, in no particular order.
func (a *arena) each(fn func(c cid.Cid, l loc)) {
	for k, l := range a.index {
		c, err := cid.Cast(k[1 : 1+k[0]])
		if err != nil {
			panic("memstore: stored key is not a CID: " + err.Error())
		}
		fn(c, l)
	}
	for s, l := range a.long {
		c, err := cid.Cast([]byte(s))
		if err != nil {
			panic("memstore: stored key is not a CID: " + err.Error())
		}
		fn(c, l)
	}
}

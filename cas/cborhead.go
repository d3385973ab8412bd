package cas

import (
	"encoding/binary"

	"github.com/ipfs/go-cid"
)

// CBOR major types, as the three high bits of an item's first byte.
const (
	majorUint   = 0
	majorNegint = 1
	majorBytes  = 2
	majorText   = 3
	majorArray  = 4
	majorMap    = 5
	majorTag    = 6
	majorSimple = 7
)

// readHead reads the head of one CBOR item: its major type, the head's
// width in bytes and its argument. ok is false for a truncated head, the
// reserved additional information 28 to 30 and indefinite lengths (31),
// none of which DAG-CBOR allows.
func readHead(data []byte) (major byte, n int, arg uint64, ok bool) {
	if len(data) == 0 {
		return 0, 0, 0, false
	}
	major, info := data[0]>>5, data[0]&0x1f
	switch {
	case info < 24:
		return major, 1, uint64(info), true
	case info == 24 && len(data) >= 2:
		return major, 2, uint64(data[1]), true
	case info == 25 && len(data) >= 3:
		return major, 3, uint64(binary.BigEndian.Uint16(data[1:])), true
	case info == 26 && len(data) >= 5:
		return major, 5, uint64(binary.BigEndian.Uint32(data[1:])), true
	case info == 27 && len(data) >= 9:
		return major, 9, binary.BigEndian.Uint64(data[1:]), true
	}
	return major, 0, 0, false
}

// shortestHead reports whether a head n bytes wide is the shortest one
// for arg, as canonical DAG-CBOR requires of integers and lengths.
func shortestHead(n int, arg uint64) bool {
	switch n {
	case 1:
		return true
	case 2:
		return arg >= 24
	case 3:
		return arg > 0xff
	case 5:
		return arg > 0xffff
	}
	return arg > 0xffffffff
}

// appendHead appends the shortest head of major type major for arg.
func appendHead(b []byte, major byte, arg uint64) []byte {
	m := major << 5
	switch {
	case arg < 24:
		return append(b, m|byte(arg))
	case arg <= 0xff:
		return append(b, m|24, byte(arg))
	case arg <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, m|25), uint16(arg))
	case arg <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(arg))
	}
	return binary.BigEndian.AppendUint64(append(b, m|27), arg)
}

// linkScanner finds the links of a DAG-CBOR block by reading item heads
// alone, without building the values: walks, gc and verification read
// the links of every block they visit.
type linkScanner struct {
	data []byte
	pos  int
	out  []cid.Cid
	skip bool // only step over items: links are neither parsed nor kept
	// known, when set, reports links (binary CIDs) the caller has met
	// already, which are then not parsed or kept again.
	known func(raw []byte) bool
	// inTag counts the tags other than 42 around the item being read.
	inTag int
}

// scanLinks returns the links of the single CBOR item data holds, in the
// order they appear. ok is false when the scanner leaves the block to the
// full decoder: anything malformed, truncated or trailing, indefinite
// lengths, map keys that are not text, a tag 42 that does not enclose a
// valid link, a tag 42 inside another tag, nesting deeper than the
// decoders allow. Tags other than 42 are opaque, as in [Links].
func scanLinks(data []byte) (links []cid.Cid, ok bool) {
	s := linkScanner{data: data}
	if !s.item(0) || s.pos != len(data) {
		return nil, false
	}
	return s.out, true
}

func (s *linkScanner) item(depth int) bool {
	if depth > maxDepth {
		return false
	}
	major, n, arg, ok := readHead(s.data[s.pos:])
	if !ok {
		return false
	}
	s.pos += n
	rest := uint64(len(s.data) - s.pos)
	switch major {
	case majorUint, majorNegint:
		return true
	case majorBytes, majorText:
		if arg > rest {
			return false
		}
		s.pos += int(arg)
		return true
	case majorArray:
		if arg > rest { // every item takes at least one byte
			return false
		}
		for range arg {
			if !s.item(depth + 1) {
				return false
			}
		}
		return true
	case majorMap:
		if arg > rest/2 {
			return false
		}
		for range arg {
			if s.pos >= len(s.data) || s.data[s.pos]>>5 != majorText {
				return false
			}
			if !s.item(depth+1) || !s.item(depth+1) {
				return false
			}
		}
		return true
	case majorTag:
		if arg != linkTag {
			// Opaque: stepped over, never a source of links. A tag 42
			// inside it is left to the full decoder, which refuses it.
			s.inTag++
			ok := s.item(depth + 1)
			s.inTag--
			return ok
		}
		if s.inTag > 0 && !s.skip {
			return false
		}
		bmajor, bn, size, ok := readHead(s.data[s.pos:])
		if !ok || bmajor != majorBytes || size > uint64(len(s.data)-s.pos-bn) {
			return false
		}
		start := s.pos + bn
		s.pos = start + int(size)
		if s.skip {
			return true
		}
		if b := s.data[start:s.pos]; s.known != nil && len(b) > 1 && b[0] == 0 && s.known(b[1:]) {
			return true
		}
		c, err := linkFromBytes(s.data[start:s.pos])
		if err != nil {
			return false
		}
		s.out = append(s.out, c)
		return true
	default: // simple values and floats; the head held the whole item
		return n != 2 || arg >= 32 // one-byte simple values below 32 are malformed
	}
}

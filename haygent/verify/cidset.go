package verify

import (
	"github.com/ipfs/go-cid"
)

// cidSet is a set of CIDs: a list while it is small, as a receipt's
// closure is (a dozen blocks or so), and a map past that.
type cidSet struct {
	list []cid.Cid
	m    map[string]cid.Cid // by KeyString
}

const cidSetList = 32

func (s *cidSet) has(c cid.Cid) bool {
	k := c.KeyString()
	if s.m != nil {
		_, ok := s.m[k]
		return ok
	}
	for _, x := range s.list {
		if x.KeyString() == k {
			return true
		}
	}
	return false
}

// hasKey reports whether the set holds the CID whose binary form is raw.
func (s *cidSet) hasKey(raw []byte) bool {
	_, ok := s.get(raw)
	return ok
}

// get returns the set's CID whose binary form is raw.
func (s *cidSet) get(raw []byte) (cid.Cid, bool) {
	if s.m != nil {
		c, ok := s.m[string(raw)]
		return c, ok
	}
	for _, c := range s.list {
		if c.KeyString() == string(raw) {
			return c, true
		}
	}
	return cid.Undef, false
}

func (s *cidSet) add(c cid.Cid) {
	switch {
	case s.has(c):
	case s.m != nil:
		s.m[c.KeyString()] = c
	case len(s.list) < cidSetList:
		if s.list == nil {
			s.list = make([]cid.Cid, 0, cidSetList)
		}
		s.list = append(s.list, c)
	default:
		s.m = make(map[string]cid.Cid, 2*cidSetList)
		for _, x := range s.list {
			s.m[x.KeyString()] = x
		}
		s.m[c.KeyString()] = c
		s.list = nil
	}
}

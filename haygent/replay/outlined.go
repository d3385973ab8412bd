package replay

import (
	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
)

// outlinedVolatile reports whether the time-free form of p (packetWork)
// must read values p holds out of line: whether a link sits at or above
// a place volatileState names.
func outlinedVolatile(p *ledger.Packet) bool {
	if !cas.HasLink(p.Payload) {
		return false
	}
	switch p.Schema {
	case "":
		return cas.HasLink(p.Payload["failures"])
	case "projection":
		for ptr, v := range p.Payload {
			path, err := haygent.SplitPointer(ptr)
			if ptr == "" {
				path, err = nil, nil
			}
			if err != nil || !cas.HasLink(v) {
				continue
			}
			for _, pat := range volatileState {
				if len(path) < len(pat) && matchPath(pat[:len(path)], path) {
					return true
				}
			}
		}
	}
	return false
}

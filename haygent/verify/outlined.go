package verify

import (
	"fmt"
	"slices"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/ipfs/go-cid"
)

// readOutlined puts back, in the input and output packets the
// verification returns, the values their payloads hold out of line, and
// reads those of every other packet the chain links, so that the
// canonical-form check covers them. A value that cannot be read is a
// canonical-form problem, and the input or output packet holding it is
// not returned. Packets without links (every packet of a run whose
// values fit in blocks) cost one comparison each.
func (vr *verifier) readOutlined(r *ledger.Receipt) error {
	// A value every state holds is named once, not once per packet.
	reported := map[string]bool{}
	problem := func(c cid.Cid, err error) {
		if !reported[err.Error()] {
			reported[err.Error()] = true
			vr.canon.add("packet %s: %v", c, err)
		}
	}
	var o *ledger.OutlinedReader
	reader := func() *ledger.OutlinedReader {
		if o == nil {
			o = ledger.NewOutlinedReader(vr.ctx, vr.st)
		}
		return o
	}
	for _, l := range []*cas.Link{&r.Input, r.Output} {
		if l == nil {
			continue
		}
		p, ok := vr.decoded[l.Cid].(*ledger.Packet)
		if !ok || len(vr.linksOf[l.Cid]) == len(p.Upstream) {
			continue
		}
		payload, err := cas.Inline(p.Payload, reader().Get)
		if err != nil {
			if cerr := vr.ctx.Err(); cerr != nil {
				return cerr
			}
			if _, isData := blockProblem(err); !isData {
				return fmt.Errorf("verify %s: packet %s: %w", vr.v.Receipt, l.Cid, err)
			}
			problem(l.Cid, err)
			delete(vr.decoded, l.Cid)
			vr.undecodable[l.Cid] = true
			continue
		}
		p.Payload = payload
	}
	// The packets checked but not decoded (the states between steps,
	// projections, proposals): those with links are rare, and read whole.
	var linked []cid.Cid
	for c := range vr.checked {
		if len(vr.linksOf[c]) > 0 {
			linked = append(linked, c)
		}
	}
	slices.SortFunc(linked, func(a, b cid.Cid) int { return strings.Compare(a.KeyString(), b.KeyString()) })
	for _, c := range linked {
		var p ledger.Packet
		err := vr.st.View(vr.ctx, c, func(data []byte) error { return cas.Unmarshal(data, &p) })
		if err == nil {
			_, err = cas.Inline(p.Payload, reader().Get)
		}
		if err != nil {
			if cerr := vr.ctx.Err(); cerr != nil {
				return cerr
			}
			if _, isData := blockProblem(err); !isData {
				return fmt.Errorf("verify %s: packet %s: %w", vr.v.Receipt, c, err)
			}
			problem(c, err)
		}
	}
	return nil
}

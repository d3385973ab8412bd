package haygent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// Values over the block limit.
//
// A packet whose encoding would be over cas.MaxBlockSize (an input
// holding a 20 MB string, and then every state of the run, which holds
// the input) is stored with values of its payload out of line: each as
// an hg/file@1 holding its canonical encoding, linked in its place
// (cas.Outline). The run state in memory keeps the values themselves,
// so steps, slots and gates see what they always saw; readers of a
// stored packet (the verifier, replay, the scheduler) put the values
// back (InlinePayload). A payload holds no link otherwise: inputs are
// JSON, and the runtime refuses an input holding a link.

// fitBlock returns an encoding of v within the block limit, where data,
// its encoding, is over it: a packet with values of its payload stored
// out of line. Any other object over the limit is an error naming the
// limit: no block over it is ever stored.
func (r *runner) fitBlock(v any, data []byte) ([]byte, error) {
	p, ok := v.(*Packet)
	if !ok {
		name := typeOf(v)
		if name == "" {
			name = fmt.Sprintf("%T", v)
		}
		return nil, fmt.Errorf("%s object of %d bytes is over the block limit of %d bytes: %w", name, len(data), cas.MaxBlockSize, cas.ErrTooLarge)
	}
	// The budget of the payload: the limit less what the packet's other
	// fields take (an empty map is one byte).
	frame := *p
	frame.Payload = map[string]any{}
	head, err := cas.Marshal(&frame)
	if err != nil {
		return nil, err
	}
	payload, err := cas.Outline(p.Payload, cas.MaxBlockSize-(len(head)-1), func(enc []byte) (cid.Cid, error) {
		c, _, err := cas.PutFile(r.ctx, r.st, bytes.NewReader(enc), &cas.PutOptions{Writer: r.w})
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("packet of %d bytes cannot be brought within the block limit of %d bytes: %w", len(data), cas.MaxBlockSize, err)
	}
	frame.Payload = payload
	out, err := cas.Marshal(&frame)
	if err != nil {
		return nil, err
	}
	if len(out) > cas.MaxBlockSize {
		return nil, fmt.Errorf("packet of %d bytes is over the block limit of %d bytes even with its values stored apart: %w", len(out), cas.MaxBlockSize, cas.ErrTooLarge)
	}
	return out, nil
}

// checkInputLinks refuses an input holding a link: in a stored payload a
// link stands for a value stored out of line, and a reader would take
// the input's own link for one.
func checkInputLinks(input map[string]any) error {
	if cas.HasLink(input) {
		return fmt.Errorf("input: holds a link, which no JSON input can (give the CID as a string): %w", cas.ErrInvalid)
	}
	return nil
}

// outlinedReader reads the values stored out of line of one store, each
// once.
type outlinedReader struct {
	ctx  context.Context
	st   cas.Store
	read map[cid.Cid]any
}

func (o *outlinedReader) get(c cid.Cid) (any, error) {
	if v, ok := o.read[c]; ok {
		return v, nil
	}
	v, err := cas.ReadOutlined(o.ctx, o.st, c)
	if err != nil {
		return nil, err
	}
	if o.read == nil {
		o.read = map[cid.Cid]any{}
	}
	o.read[c] = v
	return v, nil
}

// InlinePayload returns payload with the values a stored packet holds out
// of line read back from st: the payload as the runtime had it. A payload
// without links is returned as it is. A value that cannot be read gives
// an error wrapping the store's, or [cas.ErrNotCanonical] or
// [cas.ErrInvalid] for a file that is not what an outlined value is.
func InlinePayload(ctx context.Context, st cas.Store, payload map[string]any) (map[string]any, error) {
	if !cas.HasLink(payload) {
		return payload, nil
	}
	o := &outlinedReader{ctx: ctx, st: st}
	return cas.Inline(payload, o.get)
}

// readOutlined puts back, in the input and output packets the
// verification returns, the values their payloads hold out of line, and
// reads those of every other packet the chain links, so that the
// canonical-form check covers them. A value that cannot be read is a
// canonical-form problem, and the input or output packet holding it is
// not returned. Packets without links (every packet of a run whose
// values fit in blocks) cost one comparison each.
func (vr *verifier) readOutlined(r *Receipt) error {
	// A value every state holds is named once, not once per packet.
	reported := map[string]bool{}
	problem := func(c cid.Cid, err error) {
		if !reported[err.Error()] {
			reported[err.Error()] = true
			vr.canon.add("packet %s: %v", c, err)
		}
	}
	var o *outlinedReader
	reader := func() *outlinedReader {
		if o == nil {
			o = &outlinedReader{ctx: vr.ctx, st: vr.st}
		}
		return o
	}
	for _, l := range []*cas.Link{&r.Input, r.Output} {
		if l == nil {
			continue
		}
		p, ok := vr.decoded[l.Cid].(*Packet)
		if !ok || len(vr.linksOf[l.Cid]) == len(p.Upstream) {
			continue
		}
		payload, err := cas.Inline(p.Payload, reader().get)
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
		var p Packet
		err := vr.st.View(vr.ctx, c, func(data []byte) error { return cas.Unmarshal(data, &p) })
		if err == nil {
			_, err = cas.Inline(p.Payload, reader().get)
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

// outlinedVolatile reports whether the time-free form of p (packetWork)
// must read values p holds out of line: whether a link sits at or above
// a place volatileState names.
func outlinedVolatile(p *Packet) bool {
	if !cas.HasLink(p.Payload) {
		return false
	}
	switch p.Schema {
	case "":
		return cas.HasLink(p.Payload["failures"])
	case "projection":
		for ptr, v := range p.Payload {
			path, err := splitPointer(ptr)
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

// tooLargeInput says that an error storing the input packet is about
// the input, when it is its size: nothing has run.
func tooLargeInput(err error) error {
	if errors.Is(err, cas.ErrTooLarge) {
		return fmt.Errorf("input: %w", err)
	}
	return err
}

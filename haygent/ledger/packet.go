package ledger

import (
	"fmt"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// NewInputPacket is the input packet of an invocation: the input, in
// data-model form, under the input contract schema, recording the
// accepted upstream receipts it was built from. The runtime stores it;
// a scheduler computes its CID to check a receipt links it.
func NewInputPacket(schema string, input map[string]any, upstream []cid.Cid) *Packet {
	p := &Packet{Type: TypePacket, Schema: schema, Payload: cas.FromJSON(input).(map[string]any)}
	for _, u := range upstream {
		p.Upstream = append(p.Upstream, cas.Link{Cid: u})
	}
	return p
}

// EncodePacket returns the canonical encoding of p as it is stored: as it
// is when it fits in a block, otherwise with values of its payload stored
// out of line (SPEC, "Values over the block limit"), each put as an
// hg/file@1 of its canonical encoding by put, which returns the file's
// CID. An encoding still over the limit is an error wrapping
// cas.ErrTooLarge.
func EncodePacket(p *Packet, put func(enc []byte) (cid.Cid, error)) ([]byte, error) {
	data, err := cas.Marshal(p)
	if err != nil || len(data) <= cas.MaxBlockSize {
		return data, err
	}
	// The budget of the payload: the limit less what the packet's other
	// fields take (an empty map is one byte).
	frame := *p
	frame.Payload = map[string]any{}
	head, err := cas.Marshal(&frame)
	if err != nil {
		return nil, err
	}
	payload, err := cas.Outline(p.Payload, cas.MaxBlockSize-(len(head)-1), put)
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

package haygent

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/ledger"
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
	p, ok := v.(*ledger.Packet)
	if !ok {
		name := ledger.TypeOf(v)
		if name == "" {
			name = fmt.Sprintf("%T", v)
		}
		return nil, fmt.Errorf("%s object of %d bytes is over the block limit of %d bytes: %w", name, len(data), cas.MaxBlockSize, cas.ErrTooLarge)
	}
	return ledger.EncodePacket(p, func(enc []byte) (cid.Cid, error) {
		c, _, err := cas.PutFile(r.ctx, r.st, bytes.NewReader(enc), &cas.PutOptions{Writer: r.w})
		return c, err
	})
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

// tooLargeInput says that an error storing the input packet is about
// the input, when it is its size: nothing has run.
func tooLargeInput(err error) error {
	if errors.Is(err, cas.ErrTooLarge) {
		return fmt.Errorf("input: %w", err)
	}
	return err
}

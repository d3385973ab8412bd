package ledger

import (
	"context"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// outlinedReader reads the values stored out of line of one store, each
// once.
type OutlinedReader struct {
	ctx  context.Context
	st   cas.Store
	read map[cid.Cid]any
}

func (o *OutlinedReader) Get(c cid.Cid) (any, error) {
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
	o := NewOutlinedReader(ctx, st)
	return cas.Inline(payload, o.Get)
}

// newOutlinedReader reads the values st holds out of line.
func NewOutlinedReader(ctx context.Context, st cas.Store) *OutlinedReader {
	return &OutlinedReader{ctx: ctx, st: st}
}

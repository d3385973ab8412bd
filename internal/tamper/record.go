package tamper

import (
	"context"
	"fmt"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// EditRecord stores a copy of the run record rec with root applied to
// its root map (nil: unchanged) and node to each node record (nil:
// unchanged; it reports whether it changed the node), and returns the
// copy's CID and how many node records node changed. It moves no ref:
// the caller points one at the copy, or not, as a forger with the store's
// files would. The copy is not signed: run records are not.
func EditRecord(ctx context.Context, st cas.Store, rec cid.Cid, root func(map[string]any), node func(map[string]any) bool) (cid.Cid, int, error) {
	r, err := decodeMap(ctx, st, rec)
	if err != nil {
		return cid.Undef, 0, fmt.Errorf("record %s: %w", rec, err)
	}
	if root != nil {
		root(r)
	}
	changed := 0
	if node != nil {
		pages, _ := r["pages"].([]any)
		for i, p := range pages {
			pc, ok := p.(cid.Cid)
			if !ok {
				return cid.Undef, 0, fmt.Errorf("record %s: page %d is not a link", rec, i)
			}
			page, err := decodeMap(ctx, st, pc)
			if err != nil {
				return cid.Undef, 0, fmt.Errorf("record %s: page %d: %w", rec, i, err)
			}
			n := 0
			nodes, _ := page["nodes"].([]any)
			for _, nr := range nodes {
				if m, ok := nr.(map[string]any); ok && node(m) {
					n++
				}
			}
			if n > 0 {
				if pages[i], err = putMap(ctx, st, page); err != nil {
					return cid.Undef, 0, err
				}
				changed += n
			}
		}
	}
	c, err := putMap(ctx, st, r)
	return c, changed, err
}

func decodeMap(ctx context.Context, st cas.BlockReader, c cid.Cid) (map[string]any, error) {
	data, err := st.Get(ctx, c)
	if err != nil {
		return nil, err
	}
	n, err := cas.DecodeNode(data)
	if err != nil {
		return nil, err
	}
	m, ok := n.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("block %s is %T, not a map", c, n)
	}
	return m, nil
}

func putMap(ctx context.Context, st cas.BlockWriter, m map[string]any) (cid.Cid, error) {
	enc, err := cas.EncodeNode(m)
	if err != nil {
		return cid.Undef, err
	}
	b := cas.NewBlock(cas.DagCBOR, enc)
	if err := st.Put(ctx, b); err != nil {
		return cid.Undef, err
	}
	return b.CID(), nil
}

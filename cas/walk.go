package cas

import (
	"context"
	"fmt"

	"github.com/ipfs/go-cid"
)

// WalkOptions tune [Walk].
type WalkOptions struct {
	// SkipRawData, when set, makes Walk check raw blocks only for presence
	// and hand visit nil data for them: raw blocks have no links, so
	// reachability needs only their existence.
	SkipRawData bool
}

// Walk visits every block reachable from roots once, parents before
// children. Each block is verified before visit sees it and before its
// links are followed. A missing block is a [*NotFoundError]; a block whose
// links cannot be read stops the walk: a walk that cannot see all links
// must not report a partial closure as whole. visit runs inside
// [BlockReader.View], so it must not call the store (see View's contract).
func Walk(ctx context.Context, st BlockReader, roots []cid.Cid, opts *WalkOptions, visit func(c cid.Cid, data []byte) error) error {
	if opts == nil {
		opts = &WalkOptions{}
	}
	seen := make(map[cid.Cid]struct{})
	stack := make([]cid.Cid, 0, len(roots))
	for i := len(roots) - 1; i >= 0; i-- {
		stack = append(stack, roots[i])
	}
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, ok := seen[c]; ok {
			continue
		}
		seen[c] = struct{}{}
		if c.Type() == Raw && opts.SkipRawData {
			ok, err := st.Has(ctx, c)
			if err != nil {
				return err
			}
			if !ok {
				return &NotFoundError{CID: c}
			}
			if err := visit(c, nil); err != nil {
				return err
			}
			continue
		}
		var links []cid.Cid
		err := st.View(ctx, c, func(data []byte) error {
			if err := visit(c, data); err != nil {
				return err
			}
			var err error
			links, err = Links(c, data)
			return err
		})
		if err != nil {
			return err
		}
		for i := len(links) - 1; i >= 0; i-- {
			if _, ok := seen[links[i]]; !ok {
				stack = append(stack, links[i])
			}
		}
	}
	return nil
}

// CheckClosure returns nil if every block reachable from c is present
// and intact, and otherwise the first problem found, naming the block.
func CheckClosure(ctx context.Context, st BlockReader, c cid.Cid) error {
	err := Walk(ctx, st, []cid.Cid{c}, &WalkOptions{SkipRawData: true}, func(cid.Cid, []byte) error { return nil })
	if err != nil {
		return fmt.Errorf("closure of %s: %w", c, err)
	}
	return nil
}

// Package ipath resolves paths of the form CID/a/b through hg trees
// (hg/tree@1: an entry's name), UnixFS directories (a link's name, plain
// or HAMT-sharded) and IPLD data (a DAG-CBOR map's key, a list's index),
// following links from block to block as kubo's 'ipfs dag get' and
// 'ipfs cat' do.
//
// Every block on the way is read through the store, which verifies it
// against its CID; hg objects and DAG-CBOR must be canonical, dag-pb must
// decode strictly. A segment that names nothing, or a step into a block
// that has no names (a file, a raw block, a symlink), is an error that
// names the segment ([*SegmentError]).
package ipath

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/unixfs"
	"github.com/ipfs/go-cid"
)

// MaxSegments bounds the segments of a path.
const MaxSegments = 4096

// Path is a root CID and the names to follow from it.
type Path struct {
	Root     cid.Cid
	Segments []string
}

func (p Path) String() string {
	return strings.Join(append([]string{p.Root.String()}, p.Segments...), "/")
}

// Parse reads "CID/a/b", with an optional leading "/ipfs/". A trailing
// "/" is allowed; an empty segment elsewhere is not. ok is false when s
// does not start with a CID (it may be a pin or a run name); err is set
// when it does but the rest is not a path.
func Parse(s string) (p Path, ok bool, err error) {
	s = strings.TrimPrefix(s, "/ipfs/")
	head, rest, _ := strings.Cut(s, "/")
	c, cerr := cas.ParseCID(head)
	if cerr != nil {
		return Path{}, false, nil
	}
	p.Root = c
	rest = strings.TrimSuffix(rest, "/")
	if rest == "" {
		return p, true, nil
	}
	p.Segments = strings.Split(rest, "/")
	if len(p.Segments) > MaxSegments {
		return Path{}, true, fmt.Errorf("path %s: more than %d segments: %w", s, MaxSegments, cas.ErrInvalid)
	}
	for _, seg := range p.Segments {
		if seg == "" {
			return Path{}, true, fmt.Errorf("path %q: empty segment: %w", s, cas.ErrInvalid)
		}
	}
	return p, true, nil
}

// Result is where a path leads: the block CID, and, for a path that ends
// inside a DAG-CBOR block rather than at a link, the value it reaches
// there (InBlock true).
type Result struct {
	CID     cid.Cid
	Value   any
	InBlock bool
}

// SegmentError is a path segment that cannot be followed.
type SegmentError struct {
	Path    Path
	Index   int     // of the segment in Path.Segments
	Block   cid.Cid // the block it was looked up in
	Err     error
	Problem string
}

func (e *SegmentError) Error() string {
	return fmt.Sprintf("path %s: segment %q (in %s): %s", e.Path, e.Path.Segments[e.Index], e.Block, e.Problem)
}

func (e *SegmentError) Unwrap() error { return e.Err }

// Resolve follows p from its root. The result is a whole block unless the
// path ends inside a DAG-CBOR value that is not a link. A missing block
// wraps [cas.ErrNotFound]; a segment that names nothing is a
// [*SegmentError] wrapping [cas.ErrNotFound], one that cannot be followed
// (into a file, a scalar, a symlink) wraps [cas.ErrInvalid].
func Resolve(ctx context.Context, st cas.BlockReader, p Path) (Result, error) {
	cur := Result{CID: p.Root}
	for i := 0; i < len(p.Segments); {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		segErr := func(err error, format string, args ...any) error {
			return &SegmentError{Path: p, Index: i, Block: cur.CID, Err: err, Problem: fmt.Sprintf(format, args...)}
		}
		seg := p.Segments[i]
		if cur.InBlock {
			next, serr := step(cur.Value, seg)
			if serr != nil {
				return Result{}, segErr(serr.err, "%s", serr.msg)
			}
			i++
			if c, ok := next.(cid.Cid); ok {
				cur = Result{CID: c}
			} else {
				cur.Value = next
			}
			continue
		}
		c := cur.CID
		switch c.Type() {
		case cas.DagPB:
			n, err := unixfs.Load(ctx, st, c)
			if err != nil {
				return Result{}, err
			}
			if !n.IsDir() {
				return Result{}, segErr(cas.ErrInvalid, "a UnixFS %s has no entries", n.Type())
			}
			e, err := unixfs.Lookup(ctx, st, n, seg)
			if errors.Is(err, cas.ErrNotFound) {
				return Result{}, segErr(err, "no such entry")
			} else if err != nil {
				return Result{}, err
			}
			cur, i = Result{CID: e.CID}, i+1
		case cas.DagCBOR:
			var v any
			err := st.View(ctx, c, func(data []byte) error {
				var err error
				v, err = cas.DecodeNode(data)
				return err
			})
			if err != nil {
				return Result{}, fmt.Errorf("%s: %w", c, err)
			}
			if m, ok := v.(map[string]any); ok && m["type"] == cas.TypeTree {
				t, err := cas.LoadTree(ctx, st, c)
				if err != nil {
					return Result{}, err
				}
				next, serr := treeStep(t, seg)
				if serr != nil {
					return Result{}, segErr(serr.err, "%s", serr.msg)
				}
				cur, i = Result{CID: next}, i+1
				continue
			}
			cur = Result{CID: c, Value: v, InBlock: true}
		default:
			return Result{}, segErr(cas.ErrInvalid, "a %s block has no names", codecName(c))
		}
	}
	return cur, nil
}

// stepError is why a segment cannot be followed, and the sentinel it
// stands for.
type stepError struct {
	msg string
	err error
}

func (e *stepError) Error() string { return e.msg + ": " + e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

// treeStep returns the link of the entry name of an hg tree.
func treeStep(t *cas.TreeNode, name string) (cid.Cid, *stepError) {
	for _, e := range t.Entries {
		if e.Name != name {
			continue
		}
		if e.Kind == cas.KindSymlink {
			return cid.Undef, &stepError{"a symlink, which paths do not follow", cas.ErrInvalid}
		}
		return e.Link.Cid, nil
	}
	return cid.Undef, &stepError{"no such entry", cas.ErrNotFound}
}

// step follows one segment inside a decoded DAG-CBOR value: a map's key,
// or a list's index in decimal.
func step(v any, seg string) (any, *stepError) {
	switch x := v.(type) {
	case map[string]any:
		next, ok := x[seg]
		if !ok {
			return nil, &stepError{"no such key", cas.ErrNotFound}
		}
		return next, nil
	case []any:
		i, err := strconv.ParseUint(seg, 10, 63)
		if err != nil || strconv.FormatUint(i, 10) != seg {
			return nil, &stepError{"a list is indexed by a decimal number", cas.ErrInvalid}
		}
		if i >= uint64(len(x)) {
			return nil, &stepError{fmt.Sprintf("index out of range (the list has %d items)", len(x)), cas.ErrNotFound}
		}
		return x[i], nil
	}
	return nil, &stepError{fmt.Sprintf("a %s has no names", kindOf(v)), cas.ErrInvalid}
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []byte:
		return "bytes value"
	case float64:
		return "float"
	}
	return "number"
}

func codecName(c cid.Cid) string {
	if c.Type() == cas.Raw {
		return "raw"
	}
	return fmt.Sprintf("codec 0x%x", c.Type())
}

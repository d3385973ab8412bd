package dag

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// Workspace is where a node's workspace comes from: exactly one field is
// set. A node without one works in a new empty directory.
type Workspace struct {
	// Dir ("workspace": "DIR") is a directory, with slashes, relative to
	// the directory of the Work Order file (an absolute path is taken as
	// is). The scheduler stores it as a tree when the run starts, and the
	// run works from that tree, never from the directory.
	Dir string
	// Tree ({"tree": CID}) is a stored hg/tree@1. It is also what Dir and
	// Pin become once the scheduler has stored or resolved them.
	Tree cid.Cid
	// Pin ({"pin": NAME}) is the tree a pin of the store names when the
	// run starts.
	Pin string
	// From ({"from": NODE}) is the final workspace of an upstream node:
	// the tree its accepted receipt records as final_workspace. NODE must
	// be among the node's needs.
	From string
}

// String writes the workspace as the Work Order does.
func (ws *Workspace) String() string {
	switch {
	case ws == nil:
		return "an empty directory"
	case ws.Dir != "":
		return fmt.Sprintf("%q", ws.Dir)
	case ws.Pin != "":
		return fmt.Sprintf(`{"pin": %q}`, ws.Pin)
	case ws.From != "":
		return fmt.Sprintf(`{"from": %q}`, ws.From)
	}
	return fmt.Sprintf(`{"tree": %q}`, ws.Tree.String())
}

// workspace parses a node's "workspace" field.
func (p *parser) workspace(node string, raw json.RawMessage) *Workspace {
	const field = "workspace"
	switch kindOf(raw) {
	case kindString:
		s, ok := p.str(node, field, raw)
		switch {
		case !ok:
			return nil
		case s == "":
			p.add(node, field, "a directory must not be empty")
			return nil
		case bytes.IndexByte([]byte(s), 0) >= 0:
			p.add(node, field, "a directory must not hold NUL")
			return nil
		}
		return &Workspace{Dir: s}
	case kindObject:
	default:
		p.add(node, field, `want a directory, {"tree": CID}, {"pin": NAME} or {"from": NODE}`)
		return nil
	}
	m, ok := p.object(node, field, raw)
	if !ok {
		return nil
	}
	p.unknownIn(node, field+"/", m, "tree", "pin", "from")
	keys := sortedKeys(m)
	keys = slices.DeleteFunc(keys, func(k string) bool { return k != "tree" && k != "pin" && k != "from" })
	if len(keys) != 1 {
		p.add(node, field, `want exactly one of "tree", "pin" and "from"`)
		return nil
	}
	k := keys[0]
	s, ok := p.str(node, field+"/"+k, m[k])
	if !ok {
		return nil
	}
	switch k {
	case "tree":
		c, err := cid.Decode(s)
		if err != nil {
			p.add(node, field+"/tree", "%q is not a CID", s)
			return nil
		}
		if c.Type() != cas.DagCBOR {
			p.add(node, field+"/tree", "%s is not a tree: a tree is DAG-CBOR", s)
			return nil
		}
		return &Workspace{Tree: c}
	case "pin":
		if err := cas.CheckPinName(s); err != nil {
			p.add(node, field+"/pin", "%v", err)
			return nil
		}
		return &Workspace{Pin: s}
	}
	if !ValidName(s) {
		p.add(node, field+"/from", "node name %q: %s", s, nameRule)
		return nil
	}
	return &Workspace{From: s}
}

// ObjectWorkspace is a node's workspace in the stored Work Order: a tree
// (a directory or pin of the file, stored or resolved when the run
// started) or an upstream node.
type ObjectWorkspace struct {
	Tree *cas.Link `cbor:"tree,omitempty"`
	From string    `cbor:"from,omitempty"`
}

// objectWorkspace is the stored form of ws; a directory or pin must have
// been resolved to a tree (Tree set) first.
func objectWorkspace(node string, ws *Workspace) (*ObjectWorkspace, error) {
	switch {
	case ws == nil:
		return nil, nil
	case ws.From != "":
		return &ObjectWorkspace{From: ws.From}, nil
	case ws.Tree.Defined():
		return &ObjectWorkspace{Tree: &cas.Link{Cid: ws.Tree}}, nil
	}
	return nil, fmt.Errorf("node %q: workspace %s has not been stored as a tree", node, ws)
}

// workspaceFromObject reads a stored workspace back: exactly one of a DAG-CBOR
// tree and an upstream node among needs.
func workspaceFromObject(n ObjectNode) (*Workspace, error) {
	ws := n.Workspace
	switch {
	case ws == nil:
		return nil, nil
	case ws.Tree != nil && ws.From == "":
		if ws.Tree.Type() != cas.DagCBOR {
			return nil, &FieldError{Node: n.Name, Field: "workspace/tree", Msg: fmt.Sprintf("%s is not a tree: a tree is DAG-CBOR", ws.Tree)}
		}
		return &Workspace{Tree: ws.Tree.Cid}, nil
	case ws.Tree == nil && ws.From != "":
		if !slices.Contains(n.Needs, ws.From) {
			return nil, &FieldError{Node: n.Name, Field: "workspace/from", Msg: fmt.Sprintf("%q is not in needs", ws.From)}
		}
		return &Workspace{From: ws.From}, nil
	}
	return nil, &FieldError{Node: n.Name, Field: "workspace", Msg: `want exactly one of "tree" and "from"`}
}

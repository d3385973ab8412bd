package dag

import (
	"fmt"
	"slices"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// TypeWorkOrder is the type of the stored form of a Work Order.
const TypeWorkOrder = "hg/workorder@1"

// Object is a Work Order as stored: an hg/workorder@1 DAG-CBOR object. It
// names each node's Haygent by the CID of its package tree, so the stored
// Work Order fixes the code every node runs, wherever the files came from.
// Encode it with [cas.Marshal]; decode it with [cas.Unmarshal].
type Object struct {
	Type      string       `cbor:"type"` // TypeWorkOrder
	WorkOrder string       `cbor:"workorder"`
	Objective string       `cbor:"objective"`
	Nodes     []ObjectNode `cbor:"nodes"` // sorted by name
	Outcome   Outcome      `cbor:"outcome"`
	// MaxAttempts is the order's max_attempts, left out when it gave none.
	MaxAttempts int64 `cbor:"max_attempts,omitempty"`
}

// ObjectNode is one node of an [Object].
type ObjectNode struct {
	Name    string         `cbor:"name"`
	Haygent cas.Link       `cbor:"haygent"` // the package's hg/tree@1
	Needs   []string       `cbor:"needs"`   // sorted, no duplicates
	Input   map[string]any `cbor:"input"`   // data model; references kept as written
	// Workspace is where the node's workspace comes from, left out for
	// a node that has none (an empty directory).
	Workspace *ObjectWorkspace `cbor:"workspace,omitempty"`
}

// Outcome is the outcome of an [Object].
type Outcome struct {
	Require []string `cbor:"require"` // sorted, no duplicates; empty means every node
	// Mandatory lists, sorted, the nodes outcome.mandatory names.
	Mandatory []string `cbor:"mandatory,omitempty"`
}

// Object builds the stored form of the Work Order. pkgs maps each Haygent
// path, as written in the Work Order ([Node.Haygent]), to the CID of the
// package's hg/tree@1, which the scheduler gets by storing the package
// directory. Inputs are deep copies. A node's workspace is stored as its
// tree or its upstream node: a directory or pin must have been resolved to
// a tree ([Workspace.Tree]) first. Object refuses a path with no defined
// CID and a workspace not resolved; it checks nothing else, so Validate
// first.
func (w *WorkOrder) Object(pkgs map[string]cid.Cid) (Object, error) {
	var mandatory []string // nil when empty, as a decoded object has it
	if len(w.Mandatory) > 0 {
		mandatory = sortedSet(w.Mandatory)
	}
	o := Object{
		Type:        TypeWorkOrder,
		WorkOrder:   w.Name,
		Objective:   w.Objective,
		Nodes:       make([]ObjectNode, 0, len(w.Nodes)),
		Outcome:     Outcome{Require: sortedSet(w.Require), Mandatory: mandatory},
		MaxAttempts: int64(w.MaxAttempts),
	}
	for _, name := range sortedKeys(w.Nodes) {
		n := w.Nodes[name]
		c, ok := pkgs[n.Haygent]
		if !ok || !c.Defined() {
			return Object{}, fmt.Errorf("node %q: no package CID for Haygent %q", name, n.Haygent)
		}
		ws, err := objectWorkspace(name, n.Workspace)
		if err != nil {
			return Object{}, err
		}
		o.Nodes = append(o.Nodes, ObjectNode{
			Name:      name,
			Haygent:   cas.Link{Cid: c},
			Needs:     sortedSet(n.Needs),
			Input:     n.Input(),
			Workspace: ws,
		})
	}
	return o, nil
}

// sortedSet returns s sorted without duplicates, never nil.
func sortedSet(s []string) []string {
	out := slices.Clone(s)
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// FromObject turns a stored Work Order back into a [WorkOrder], for Waves,
// Dot, Validate(nil) and the like: nodes in name order, each node's Haygent
// the string form of its package CID. It refuses an object of another
// type, unsorted or duplicate nodes, and invalid node names.
func FromObject(o Object) (*WorkOrder, error) {
	if o.Type != TypeWorkOrder {
		return nil, &FieldError{Field: "type", Msg: fmt.Sprintf("%q, want %q", o.Type, TypeWorkOrder)}
	}
	if o.MaxAttempts < 0 || o.MaxAttempts > MaxAttemptsLimit {
		return nil, &FieldError{Field: "max_attempts", Msg: fmt.Sprintf("%d: want 1 to %d", o.MaxAttempts, MaxAttemptsLimit)}
	}
	w := &WorkOrder{
		Name:        o.WorkOrder,
		Objective:   o.Objective,
		Nodes:       make(map[string]*Node, len(o.Nodes)),
		Require:     slices.Clone(o.Outcome.Require),
		Mandatory:   slices.Clone(o.Outcome.Mandatory),
		MaxAttempts: int(o.MaxAttempts),
	}
	for i, n := range o.Nodes {
		if !ValidName(n.Name) {
			return nil, &FieldError{Node: n.Name, Msg: "invalid node name: " + nameRule}
		}
		if i > 0 && o.Nodes[i-1].Name >= n.Name {
			return nil, &FieldError{Node: n.Name, Msg: "nodes are not sorted by name, or a name repeats"}
		}
		ws, err := workspaceFromObject(n)
		if err != nil {
			return nil, err
		}
		node := &Node{Name: n.Name, Haygent: n.Haygent.String(), Needs: slices.Clone(n.Needs), Workspace: ws}
		if err := node.SetInput(n.Input); err != nil {
			return nil, &FieldError{Node: n.Name, Field: "input", Msg: err.Error()}
		}
		w.Order = append(w.Order, n.Name)
		w.Nodes[n.Name] = node
	}
	return w, nil
}

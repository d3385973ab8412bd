package natsengine

import (
	"errors"
	"fmt"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
)

// Types of the messages, in their "type" field.
const (
	// TypeRequest is an invocation, engine to worker. Version 3: as
	// version 2 (the package travels through the blocks bucket unless its
	// blocks are inline), from an engine that reads batched outcomes
	// ([TypeOutcomes]).
	TypeRequest = "hg/nats-invocation@3"
	// TypeRequestV2 is an invocation from an engine that reads only
	// single replies: a worker answers it with a [TypeReply] of its own.
	TypeRequestV2 = "hg/nats-invocation@2"
	TypeReply     = "hg/nats-outcome@1" // a notice or an outcome, worker to engine
	// TypeOutcomes is several replies in one message, worker to engine
	// (see [MaxBatchOutcomes]).
	TypeOutcomes = "hg/nats-outcomes@1"
	TypeBlocks   = "hg/nats-blocks@1" // a list of blocks kept in the Object Store
	// TypeHeartbeat is a worker's "still working on it", on a core
	// subject: information for the engine's progress, never evidence.
	TypeHeartbeat = "hg/nats-heartbeat@1"
)

// States of a reply.
const (
	StateStarted = "started" // a worker took the invocation
	StateDone    = "done"    // the outcome: a receipt and its blocks
	StateError   = "error"   // the invocation could not be carried out
)

// ErrRefused is wrapped by every error about a message that does not
// decode strictly or whose blocks do not match their CIDs.
var ErrRefused = errors.New("message refused")

// wireBlock is a block as it travels: the binary CID and the bytes.
type wireBlock struct {
	CID  []byte `cbor:"cid"`
	Data []byte `cbor:"data"`
}

// wireRequest is the body of a work message.
type wireRequest struct {
	Type      string          `cbor:"type"`
	ID        string          `cbor:"id"`
	Reply     string          `cbor:"reply"`
	Deadline  string          `cbor:"deadline"`
	Run       string          `cbor:"run"`
	Node      string          `cbor:"node"`
	Package   cas.Link        `cbor:"package"`
	Blocks    []wireBlock     `cbor:"blocks,omitempty"`
	Input     cbor.RawMessage `cbor:"input"`
	Upstream  []cas.Link      `cbor:"upstream"`
	Workspace *cas.Link       `cbor:"workspace,omitempty"`
}

// wireReply is the body of a result message.
type wireReply struct {
	Type    string      `cbor:"type"`
	ID      string      `cbor:"id"`
	State   string      `cbor:"state"`
	Worker  string      `cbor:"worker"`
	Receipt *cas.Link   `cbor:"receipt,omitempty"`
	Blocks  []wireBlock `cbor:"blocks,omitempty"`
	Object  string      `cbor:"object,omitempty"`
	Error   string      `cbor:"error,omitempty"`
}

// wireHeartbeat is the body of a heartbeat: a worker says it is still
// running invocation ID.
type wireHeartbeat struct {
	Type   string `cbor:"type"`
	ID     string `cbor:"id"`
	Worker string `cbor:"worker"`
}

// decodeHeartbeat decodes a heartbeat strictly: canonical DAG-CBOR with
// exactly its fields, its type, an invocation id and a worker key in
// their text forms.
func decodeHeartbeat(data []byte) (*wireHeartbeat, error) {
	var w wireHeartbeat
	if err := cas.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRefused, err)
	}
	if w.Type != TypeHeartbeat {
		return nil, fmt.Errorf("%w: type %q, want %q", ErrRefused, w.Type, TypeHeartbeat)
	}
	if !validID(w.ID) {
		return nil, fmt.Errorf("%w: bad invocation id %q", ErrRefused, w.ID)
	}
	if _, err := ledger.ParsePublicKey(w.Worker); err != nil {
		return nil, fmt.Errorf("%w: worker: %v", ErrRefused, err)
	}
	return &w, nil
}

// wireBlocks is the content of an Object Store object.
type wireBlocks struct {
	Type   string      `cbor:"type"`
	Blocks []wireBlock `cbor:"blocks"`
}

// Request is an invocation as it travels from an engine to a worker.
type Request struct {
	ID       string    // the invocation id: the last token of the subject and the message id
	Reply    string    // the subject the worker publishes its notices and outcome to
	Deadline time.Time // the engine gives up then; no worker starts the invocation after it
	// Inline sends the package blocks in the message. Otherwise they are
	// in the blocks bucket, and a worker that does not have the package
	// yet fetches them there, once; a decoded request has them only if
	// they were inline.
	Inline bool
	// Batched says the engine reads batched outcomes: a decoded request
	// of type [TypeRequest] has it, one of [TypeRequestV2] does not.
	// [EncodeRequest] always writes [TypeRequest].
	Batched bool
	// Invocation is the work. Its Workspace travels, by CID; its
	// WorkspaceBlocks do not (they go through the blocks bucket), and a
	// decoded request has none.
	Invocation scheduler.Invocation
}

// EncodeRequest returns the message body of r: canonical DAG-CBOR. The
// package blocks go inline if r.Inline.
func EncodeRequest(r *Request) ([]byte, error) {
	inv := r.Invocation
	if !inv.Package.Defined() {
		return nil, errors.New("natsengine: invocation without a package CID")
	}
	input, err := cas.EncodeNode(cas.FromJSON(inv.Input))
	if err != nil {
		return nil, fmt.Errorf("natsengine: input: %w", err)
	}
	w := wireRequest{
		Type: TypeRequest, ID: r.ID, Reply: r.Reply, Deadline: r.Deadline.UTC().Format(time.RFC3339Nano),
		Run: inv.Run, Node: inv.Node, Package: cas.Link{Cid: inv.Package}, Input: input,
	}
	if r.Inline {
		w.Blocks = toWire(inv.PackageBlocks)
	}
	for _, u := range inv.Upstream {
		w.Upstream = append(w.Upstream, cas.Link{Cid: u})
	}
	if inv.Workspace.Defined() {
		w.Workspace = &cas.Link{Cid: inv.Workspace} // its blocks travel through the blocks bucket
	}
	return cas.Marshal(&w)
}

// DecodeRequest decodes a message body strictly and verifies every
// inline package block against its CID: a message with a tampered block
// is refused. Every error wraps [ErrRefused]. When the body decoded but
// did not verify, the returned Request is not nil and holds the ID and
// Reply, so that a worker can say why it refused.
func DecodeRequest(data []byte) (*Request, error) {
	var w wireRequest
	if err := cas.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRefused, err)
	}
	if w.Type != TypeRequest && w.Type != TypeRequestV2 {
		return nil, fmt.Errorf("%w: type %q, want %q or %q", ErrRefused, w.Type, TypeRequest, TypeRequestV2)
	}
	if !validID(w.ID) {
		return nil, fmt.Errorf("%w: bad invocation id %q", ErrRefused, w.ID)
	}
	r := &Request{ID: w.ID, Reply: w.Reply, Inline: len(w.Blocks) > 0, Batched: w.Type == TypeRequest}
	refuse := func(format string, args ...any) (*Request, error) {
		return r, fmt.Errorf("%w: invocation %s: %w", ErrRefused, w.ID, fmt.Errorf(format, args...))
	}
	deadline, err := time.Parse(time.RFC3339Nano, w.Deadline)
	if err != nil {
		return refuse("deadline: %v", err)
	}
	r.Deadline = deadline
	in, err := cas.DecodeNode(w.Input)
	if err != nil {
		return refuse("input: %w", err)
	}
	input, ok := in.(map[string]any)
	if !ok {
		return refuse("input is %T, not a map", in)
	}
	blocks, err := fromWire(w.Blocks)
	if err != nil {
		return refuse("%w", err)
	}
	if !w.Package.Cid.Defined() {
		return refuse("package: an undefined CID")
	}
	r.Invocation = scheduler.Invocation{Run: w.Run, Node: w.Node, Package: w.Package.Cid, PackageBlocks: blocks, Input: input}
	for _, u := range w.Upstream {
		r.Invocation.Upstream = append(r.Invocation.Upstream, u.Cid)
	}
	if w.Workspace != nil {
		if !w.Workspace.Cid.Defined() {
			return refuse("workspace: an undefined CID")
		}
		r.Invocation.Workspace = w.Workspace.Cid
	}
	return r, nil
}

// decodeReply decodes a result message strictly. Blocks are verified by
// the caller (they may be in the Object Store).
func decodeReply(data []byte) (*wireReply, error) {
	var w wireReply
	if err := cas.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRefused, err)
	}
	if w.Type != TypeReply {
		return nil, fmt.Errorf("%w: type %q, want %q", ErrRefused, w.Type, TypeReply)
	}
	return &w, nil
}

// encodeBlocks returns the content of an Object Store object holding blocks.
func encodeBlocks(blocks []cas.Block) ([]byte, error) {
	return cas.Marshal(&wireBlocks{Type: TypeBlocks, Blocks: toWire(blocks)})
}

// decodeBlocks decodes an Object Store object and verifies every block.
func decodeBlocks(data []byte) ([]cas.Block, error) {
	var w wireBlocks
	if err := cas.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRefused, err)
	}
	if w.Type != TypeBlocks {
		return nil, fmt.Errorf("%w: type %q, want %q", ErrRefused, w.Type, TypeBlocks)
	}
	blocks, err := fromWire(w.Blocks)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return blocks, nil
}

func toWire(blocks []cas.Block) []wireBlock {
	out := make([]wireBlock, len(blocks))
	for i, b := range blocks {
		out[i] = wireBlock{CID: b.CID().Bytes(), Data: b.Data()}
	}
	return out
}

// fromWire verifies every block against its CID (cas.NewBlockWithCID).
func fromWire(ws []wireBlock) ([]cas.Block, error) {
	out := make([]cas.Block, 0, len(ws))
	for i, w := range ws {
		c, err := cas.CastCID(w.CID)
		if err != nil {
			return nil, fmt.Errorf("block %d: %w", i, err)
		}
		b, err := cas.NewBlockWithCID(c, w.Data)
		if err != nil {
			return nil, fmt.Errorf("block %d: %w", i, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// withoutBlocks returns blocks minus those whose CID is in skip.
func withoutBlocks(blocks []cas.Block, skip map[cid.Cid]bool) []cas.Block {
	out := make([]cas.Block, 0, len(blocks))
	for _, b := range blocks {
		if !skip[b.CID()] {
			out = append(out, b)
		}
	}
	return out
}

// validID reports whether s is an invocation id: 32 lowercase hex digits,
// so that it is one subject token.
func validID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

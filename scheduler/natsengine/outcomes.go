package natsengine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/fxamacker/cbor/v2"
	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/ipfs/go-cid"
)

// Batched outcomes: a worker whose replies to one engine pile up while
// it publishes (its jobs finish together) sends them as one message,
//
//	{"type": "hg/nats-outcomes@1", "outcomes": [replies, each exactly a
//	 "hg/nats-outcome@1" body, state "done" or "error"]}
//
// on the subject PREFIX.result.ENGINE.batch-TOKEN (TOKEN 32 hex digits,
// also its message id, so a retried publish is stored once). The server
// then stores, delivers and removes one message instead of one a reply.
// A worker batches only for a request of type [TypeRequest], whose
// engine reads batches; one reply alone goes as before, on its
// invocation's own subject.
//
// The engine trusts no member. It decodes the whole message strictly
// (a batch that does not decode hands nothing to anyone: its
// invocations keep waiting for a good reply) and then judges each member
// alone: one for an invocation it is not waiting for (another engine's,
// one already answered) is dropped; an invocation named more than once,
// a member of another type or of a state a batch may not carry, is
// refused to its invocation; every other member is handed to its
// invocation like a single reply, whose blocks are then verified and
// whose receipt the scheduler verifies. A batch of more than
// [MaxBatchOutcomes] members is refused to every invocation it names.

// MaxBatchOutcomes bounds the replies in one batched message: a worker
// sends at most that many together, and an engine refuses a batch of
// more.
const MaxBatchOutcomes = 32

// wireOutcomes is the body of a batched reply message.
type wireOutcomes struct {
	Type     string      `cbor:"type"`
	Outcomes []wireReply `cbor:"outcomes"`
}

// encodedOutcomes is wireOutcomes with its members encoded already.
type encodedOutcomes struct {
	Type     string            `cbor:"type"`
	Outcomes []cbor.RawMessage `cbor:"outcomes"`
}

// errOversize is the error of a batch of too many members.
var errOversize = fmt.Errorf("%w: a batch of more than %d outcomes", ErrRefused, MaxBatchOutcomes)

// decodeOutcomes decodes a batched reply strictly. A batch of too many
// members returns them with an error wrapping errOversize, so that the
// engine can tell each of their invocations.
func decodeOutcomes(data []byte) ([]wireReply, error) {
	var w wireOutcomes
	if err := cas.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRefused, err)
	}
	if w.Type != TypeOutcomes {
		return nil, fmt.Errorf("%w: type %q, want %q", ErrRefused, w.Type, TypeOutcomes)
	}
	if len(w.Outcomes) > MaxBatchOutcomes {
		return w.Outcomes, errOversize
	}
	return w.Outcomes, nil
}

// onBatch hands the members of a batched reply to the invocations
// waiting for them, each judged alone.
func (e *Engine) onBatch(subject string, data []byte) {
	members, err := decodeOutcomes(data)
	if err != nil && members == nil {
		e.opts.Log("natsengine: result on %s: %v", subject, err)
		return
	}
	named := make(map[string]int, len(members))
	for _, m := range members {
		named[m.ID]++
	}
	if err == nil {
		e.precheck(members, named)
	}
	for _, m := range members {
		if !validID(m.ID) {
			e.opts.Log("natsengine: result on %s: a member with the bad id %q", subject, m.ID)
			continue
		}
		e.mu.Lock()
		w := e.waiting[m.ID]
		e.mu.Unlock()
		if w == nil {
			continue // another engine's, or answered before
		}
		ev := event{reply: &m}
		switch {
		case err != nil:
			ev = event{err: err}
		case m.Type != TypeReply:
			ev = event{err: fmt.Errorf("%w: a member of type %q in a batch, want %q", ErrRefused, m.Type, TypeReply)}
		case named[m.ID] > 1:
			ev = event{err: fmt.Errorf("%w: invocation %s named %d times in one batch", ErrRefused, m.ID, named[m.ID])}
		case m.State != StateDone && m.State != StateError:
			ev = event{err: fmt.Errorf("%w: a member of state %q in a batch", ErrRefused, m.State)}
		}
		if ev.err != nil {
			e.opts.Log("natsengine: result on %s: %v", subject, ev.err)
		}
		e.hand(w, ev)
	}
}

// replyFunc publishes a reply body on subject under message id msgID,
// reporting whether the server stored it.
type replyFunc func(ctx context.Context, subject, msgID string, data []byte) error

// batcher gathers a worker's replies to each engine: while one
// message to an engine is being published, the replies that come meanwhile
// wait and then go together, at most [MaxBatchOutcomes] and limit bytes a
// message. So a worker whose jobs finish one at a time sends each reply
// at once, as before, and one whose jobs finish together sends fewer
// messages; no reply waits for one that is not there yet.
type batcher struct {
	ctx     context.Context // the worker's: publishing ends with it
	limit   int
	publish replyFunc

	mu     sync.Mutex
	queues map[string]*replyQueue // by the engine's result subject prefix
}

// replyQueue is the replies to one engine waiting to be published; busy
// while a goroutine publishes them.
type replyQueue struct {
	pending []*queuedReply
	busy    bool
}

// queuedReply is one reply: its body alone, its subject and message id
// as a single message, and where its publication's result goes.
type queuedReply struct {
	reply   wireReply
	data    []byte
	subject string
	msgID   string
	done    chan error
}

func newBatcher(ctx context.Context, limit int, publish replyFunc) *batcher {
	return &batcher{ctx: ctx, limit: limit, publish: publish, queues: map[string]*replyQueue{}}
}

// send publishes r (whose body is data, at most the limit) to the
// engine whose result subjects start with prefix, alone or with others,
// and returns once it is stored or failed to be.
func (b *batcher) send(prefix, subject, msgID string, r wireReply, data []byte) error {
	q := &queuedReply{reply: r, data: data, subject: subject, msgID: msgID, done: make(chan error, 1)}
	b.mu.Lock()
	rq := b.queues[prefix]
	if rq == nil {
		rq = &replyQueue{}
		b.queues[prefix] = rq
	}
	rq.pending = append(rq.pending, q)
	if !rq.busy {
		rq.busy = true
		go b.drain(prefix, rq)
	}
	b.mu.Unlock()
	return <-q.done
}

// drain publishes what waits for one engine until nothing does.
func (b *batcher) drain(prefix string, rq *replyQueue) {
	for {
		b.mu.Lock()
		if len(rq.pending) == 0 {
			rq.busy = false
			delete(b.queues, prefix)
			b.mu.Unlock()
			return
		}
		n := batchLen(len(rq.pending), MaxBatchOutcomes, b.limit, func(i int) int { return len(rq.pending[i].data) })
		take := rq.pending[:n:n]
		rq.pending = rq.pending[n:]
		b.mu.Unlock()
		err := b.publishBatch(prefix, take)
		for _, q := range take {
			q.done <- err
		}
	}
}

// publishBatch publishes one reply on its own subject, or several as one
// batched message.
func (b *batcher) publishBatch(prefix string, take []*queuedReply) error {
	if len(take) == 1 {
		return b.publish(b.ctx, take[0].subject, take[0].msgID, take[0].data)
	}
	// Each member as it was encoded alone: the same bytes as encoding the
	// reply again, without doing so.
	w := encodedOutcomes{Type: TypeOutcomes, Outcomes: make([]cbor.RawMessage, len(take))}
	for i, q := range take {
		w.Outcomes[i] = q.data
	}
	data, err := cas.Marshal(&w)
	if err != nil {
		return err
	}
	token := batchToken + newID()
	return b.publish(b.ctx, prefix+token, token, data)
}

// enginePrefix is the part of a reply subject before its last token: the
// engine's result subjects.
func enginePrefix(reply string) string {
	return reply[:strings.LastIndexByte(reply, '.')+1]
}

// precheck checks the signatures of the receipts a batch brings, as one
// batch for each scheduler's signature cache ([scheduler.Invocation]
// Signatures), before its members are handed on: a batch that verifies
// is remembered there, and each receipt's own check, in the scheduler,
// then finds its signature checked. It decides nothing: a member it
// cannot use (not done, not waited for, named twice, its receipt block
// not among its blocks or not its CID's bytes) is left out, and a batch
// that fails leaves every receipt to its own full check.
func (e *Engine) precheck(members []wireReply, named map[string]int) {
	sigs := make([]*ledger.Signatures, len(members))
	e.mu.Lock()
	for i, m := range members {
		if w := e.waiting[m.ID]; w != nil {
			sigs[i] = w.sigs
		}
	}
	e.mu.Unlock()
	groups := map[*ledger.Signatures]*receiptBlocks{}
	for i, m := range members {
		if sigs[i] == nil || named[m.ID] > 1 || m.Type != TypeReply || m.State != StateDone || m.Receipt == nil || !m.Receipt.Cid.Defined() {
			continue
		}
		c := m.Receipt.Cid
		for _, wb := range m.Blocks {
			if !bytes.Equal(wb.CID, c.Bytes()) {
				continue
			}
			if b, err := cas.NewBlockWithCID(c, wb.Data); err == nil {
				g := groups[sigs[i]]
				if g == nil {
					g = &receiptBlocks{}
					groups[sigs[i]] = g
				}
				g.add(b)
			}
			break
		}
	}
	for s, g := range groups {
		if len(g.cids) > 1 {
			s.PrecheckReceipts(context.Background(), g, g.cids)
		}
	}
}

// receiptBlocks is a few receipt blocks, each verified against its CID,
// read as a [cas.BlockReader].
type receiptBlocks struct {
	cids   []cid.Cid
	blocks map[cid.Cid]cas.Block
}

func (r *receiptBlocks) add(b cas.Block) {
	if r.blocks == nil {
		r.blocks = map[cid.Cid]cas.Block{}
	}
	if _, ok := r.blocks[b.CID()]; !ok {
		r.blocks[b.CID()] = b
		r.cids = append(r.cids, b.CID())
	}
}

var errNoBlock = errors.New("natsengine: not a receipt of the batch")

func (r *receiptBlocks) Has(_ context.Context, c cid.Cid) (bool, error) {
	_, ok := r.blocks[c]
	return ok, nil
}

func (r *receiptBlocks) Get(_ context.Context, c cid.Cid) ([]byte, error) {
	b, ok := r.blocks[c]
	if !ok {
		return nil, errNoBlock
	}
	return bytes.Clone(b.Data()), nil
}

func (r *receiptBlocks) View(_ context.Context, c cid.Cid, fn func([]byte) error) error {
	b, ok := r.blocks[c]
	if !ok {
		return errNoBlock
	}
	return fn(b.Data())
}

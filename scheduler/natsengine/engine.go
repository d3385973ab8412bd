package natsengine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Options configure an [Engine].
type Options struct {
	Names
	// Timeout bounds each invocation, from its publication to its
	// outcome: one not picked up, or not answered, within it fails.
	// Default 10 minutes. Workers see it as the invocation's deadline.
	Timeout time.Duration
	// InlineLimit is the largest message body sent as is; an invocation
	// whose package blocks make it bigger sends them through the Object
	// Store. Default 512 KiB, and never more than the server's max payload
	// less 8 KiB.
	InlineLimit int
	// Log, if set, is told of messages the engine drops.
	Log func(format string, args ...any)
	// BlockPut, if set, is told of every workspace block the engine puts
	// in the blocks bucket, with its size.
	BlockPut func(c cid.Cid, size int)
}

// Engine runs invocations on workers over NATS JetStream; it implements
// [scheduler.Engine]. Make one with [New] and Close it when done.
type Engine struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	obs   jetstream.ObjectStore
	work  jetstream.Stream
	opts  Options
	id    string
	limit int
	put   *blockPutter // workspace blocks

	cons     jetstream.ConsumeContext
	consName string
	adv      *nats.Subscription

	mu      sync.Mutex
	waiting map[string]*waiter // by invocation id
	bySeq   map[uint64]string  // work stream sequence -> invocation id
	closed  chan struct{}
	once    sync.Once
}

// waiter is one Invoke waiting for its notices and outcome.
type waiter struct {
	events chan event
	done   chan struct{} // closed when Invoke returns
}

// event is what the engine hears about an invocation: a reply, a reply
// that did not decode, or the consumer giving up on it.
type event struct {
	reply      *wireReply
	err        error
	deliveries uint64
}

var _ scheduler.Engine = (*Engine)(nil)

// New connects an engine to the JetStream of nc: it makes sure the work
// and results streams and the Object Store bucket exist, and starts
// reading this engine's results.
func New(nc *nats.Conn, opts Options) (*Engine, error) {
	opts.Names = opts.Names.withDefaults()
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Minute
	}
	if opts.Log == nil {
		opts.Log = func(string, ...any) {}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("natsengine: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	obs, err := setup(ctx, js, opts.Names)
	if err != nil {
		return nil, err
	}
	work, err := js.Stream(ctx, opts.Stream)
	if err != nil {
		return nil, fmt.Errorf("natsengine: stream %s: %w", opts.Stream, err)
	}
	put, err := newBlockPutter(ctx, js, opts)
	if err != nil {
		return nil, err
	}
	e := &Engine{
		nc: nc, js: js, obs: obs, work: work, opts: opts, id: newID(),
		limit:   inlineLimit(opts.InlineLimit, nc.MaxPayload()),
		waiting: map[string]*waiter{}, bySeq: map[uint64]string{}, closed: make(chan struct{}),
		put: put,
	}
	e.consName = "hg-engine-" + e.id
	cons, err := js.CreateConsumer(ctx, opts.Results, jetstream.ConsumerConfig{
		Name: e.consName, FilterSubject: opts.resultPrefix() + e.id + ".*",
		AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
		InactiveThreshold: time.Hour, Description: "hg: the results of one engine",
	})
	if err != nil {
		return nil, fmt.Errorf("natsengine: results consumer: %w", err)
	}
	if e.cons, err = cons.Consume(e.onResult, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		e.opts.Log("natsengine: results: %v", err)
	})); err != nil {
		e.deleteConsumer()
		return nil, fmt.Errorf("natsengine: results: %w", err)
	}
	// The consumer tells when it gave up on a message: a worker died or
	// failed to answer MaxDeliver times.
	advisory := "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + opts.Stream + "." + opts.Consumer
	if e.adv, err = nc.Subscribe(advisory, e.onAdvisory); err != nil {
		e.Close()
		return nil, fmt.Errorf("natsengine: %w", err)
	}
	return e, nil
}

// ID returns the engine's id: the ENGINE token of its result subjects.
func (e *Engine) ID() string { return e.id }

// Close stops reading results and removes the engine's consumer; an
// Invoke still waiting returns an error.
func (e *Engine) Close() error {
	e.once.Do(func() {
		close(e.closed)
		if e.adv != nil {
			_ = e.adv.Unsubscribe()
		}
		if e.cons != nil {
			e.cons.Stop()
		}
		e.deleteConsumer()
	})
	return nil
}

func (e *Engine) deleteConsumer() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = e.js.DeleteConsumer(ctx, e.opts.Results, e.consName)
}

// Invoke implements [scheduler.Engine]: it publishes the invocation to
// the work queue and waits for a worker's outcome, ctx's end, or the
// timeout. The outcome's blocks are verified against their CIDs here and
// the receipt is left to the scheduler to verify; the blocks of the
// package and of the workspace, which workers do not send back, are added
// from inv.
func (e *Engine) Invoke(ctx context.Context, inv scheduler.Invocation) (scheduler.Outcome, error) {
	select {
	case <-e.closed:
		return scheduler.Outcome{}, fmt.Errorf("natsengine: node %s: engine closed", inv.Node)
	default:
	}
	// The workspace's blocks go to the blocks bucket, those not there yet.
	if err := e.put.workspace(ctx, inv); err != nil {
		return scheduler.Outcome{}, fmt.Errorf("natsengine: node %s: %w", inv.Node, err)
	}
	id := newID()
	w := &waiter{events: make(chan event, 8), done: make(chan struct{})}
	e.mu.Lock()
	e.waiting[id] = w
	e.mu.Unlock()
	var seq uint64
	var object string
	defer func() {
		close(w.done)
		e.mu.Lock()
		delete(e.waiting, id)
		delete(e.bySeq, seq)
		e.mu.Unlock()
		if object != "" {
			e.deleteObject(object)
		}
	}()
	fail := func(format string, args ...any) (scheduler.Outcome, error) {
		return scheduler.Outcome{}, fmt.Errorf("natsengine: node %s: %w", inv.Node, fmt.Errorf(format, args...))
	}
	deadline := time.Now().Add(e.opts.Timeout)
	req := &Request{ID: id, Reply: e.opts.resultPrefix() + e.id + "." + id, Deadline: deadline, Invocation: inv}
	data, err := EncodeRequest(req)
	if err != nil {
		return fail("%w", err)
	}
	if len(data) > e.limit {
		object = "invocation-" + id
		content, err := encodeBlocks(inv.PackageBlocks)
		if err != nil {
			return fail("%w", err)
		}
		if _, err := e.obs.PutBytes(ctx, object, content); err != nil {
			return fail("put package blocks in the object store: %w", err)
		}
		req.Object = object
		if data, err = EncodeRequest(req); err != nil {
			return fail("%w", err)
		}
	}
	ack, err := e.js.Publish(ctx, e.opts.workSubject(id), data, jetstream.WithMsgID(id), jetstream.WithExpectStream(e.opts.Stream))
	if err != nil {
		return fail("publish: %w", err)
	}
	seq = ack.Sequence
	e.mu.Lock()
	e.bySeq[seq] = id
	e.mu.Unlock()

	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	worker := ""
	for {
		select {
		case <-ctx.Done():
			e.abandon(id, seq)
			return fail("%w", context.Cause(ctx))
		case <-e.closed:
			e.abandon(id, seq)
			return fail("engine closed")
		case <-timer.C:
			e.abandon(id, seq)
			if worker == "" {
				return fail("not picked up by any worker within %v (is 'hg worker' running on stream %s?)", e.opts.Timeout, e.opts.Stream)
			}
			return fail("worker %s took it but sent no outcome within %v", worker, e.opts.Timeout)
		case ev := <-w.events:
			switch {
			case ev.err != nil:
				e.abandon(id, seq)
				return fail("%w", ev.err)
			case ev.deliveries > 0:
				e.abandon(id, seq)
				return fail("handed to workers %d times without an outcome (the consumer's MaxDeliver)", ev.deliveries)
			}
			r := ev.reply
			switch r.State {
			case StateStarted:
				worker = r.Worker
			case StateError:
				return fail("worker %s: %s", r.Worker, r.Error)
			case StateDone:
				return e.outcome(ctx, inv, id, r)
			default:
				e.abandon(id, seq)
				return fail("%w: worker %s sent state %q", ErrRefused, r.Worker, r.State)
			}
		}
	}
}

// outcome fetches and verifies the blocks of a done reply.
func (e *Engine) outcome(ctx context.Context, inv scheduler.Invocation, id string, r *wireReply) (scheduler.Outcome, error) {
	fail := func(err error) (scheduler.Outcome, error) {
		return scheduler.Outcome{}, fmt.Errorf("natsengine: node %s: outcome from worker %s: %w", inv.Node, r.Worker, err)
	}
	if r.Receipt == nil {
		return fail(fmt.Errorf("%w: no receipt", ErrRefused))
	}
	var blocks []cas.Block
	var err error
	if r.Object != "" {
		if !strings.HasPrefix(r.Object, "outcome-"+id+"-") {
			return fail(fmt.Errorf("%w: object %q is not one of this invocation's", ErrRefused, r.Object))
		}
		data, gerr := e.obs.GetBytes(ctx, r.Object)
		e.deleteObject(r.Object)
		if gerr != nil {
			return fail(fmt.Errorf("object %s: %w", r.Object, gerr))
		}
		blocks, err = decodeBlocks(data)
	} else {
		blocks, err = fromWire(r.Blocks)
		if err != nil {
			err = fmt.Errorf("%w: %w", ErrRefused, err)
		}
	}
	if err != nil {
		return fail(err)
	}
	have := make(map[cid.Cid]bool, len(blocks))
	for _, b := range blocks {
		have[b.CID()] = true
	}
	blocks = append(blocks, withoutBlocks(inv.PackageBlocks, have)...)
	blocks = withBlocks(blocks, inv.WorkspaceBlocks) // not sent back either
	return scheduler.Outcome{Receipt: r.Receipt.Cid, Blocks: blocks}, nil
}

// abandon tells workers to stop an invocation and removes it from the
// work queue if no worker took it.
func (e *Engine) abandon(id string, seq uint64) {
	_ = e.nc.Publish(e.opts.cancelSubject(id), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = e.work.DeleteMsg(ctx, seq)
}

func (e *Engine) deleteObject(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.obs.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		e.opts.Log("natsengine: delete object %s: %v", name, err)
	}
}

// onResult hands a result message to the Invoke waiting for it.
func (e *Engine) onResult(m jetstream.Msg) {
	defer func() { _ = m.Ack() }()
	id := lastToken(m.Subject())
	e.mu.Lock()
	w := e.waiting[id]
	e.mu.Unlock()
	if w == nil {
		return // abandoned, or not ours
	}
	r, err := decodeReply(m.Data())
	if err == nil && r.ID != id {
		err = fmt.Errorf("%w: reply for %s on the subject of %s", ErrRefused, r.ID, id)
	}
	ev := event{reply: r}
	if err != nil {
		e.opts.Log("natsengine: result on %s: %v", m.Subject(), err)
		ev = event{err: err}
	}
	select {
	case w.events <- ev:
	case <-w.done:
	}
}

// onAdvisory fails the invocation the work consumer gave up on.
func (e *Engine) onAdvisory(m *nats.Msg) {
	var a struct {
		StreamSeq  uint64 `json:"stream_seq"`
		Deliveries uint64 `json:"deliveries"`
	}
	if json.Unmarshal(m.Data, &a) != nil || a.StreamSeq == 0 {
		return
	}
	e.mu.Lock()
	w := e.waiting[e.bySeq[a.StreamSeq]]
	e.mu.Unlock()
	if w == nil {
		return
	}
	if a.Deliveries == 0 {
		a.Deliveries = 1
	}
	select {
	case w.events <- event{deliveries: a.Deliveries}:
	case <-w.done:
	}
}

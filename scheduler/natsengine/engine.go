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
	"github.com/haygent/hg/haygent/ledger"
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
	// Notify, if set, is told what the engine notices while invocations
	// wait: the server lost and regained, no worker consuming, a worker
	// gone silent, an invocation taken again (see [Notice]). It is called
	// from the engine's goroutines and must not block.
	Notify func(Notice)
	// Silence is how long a worker that took an invocation may send
	// nothing (neither a notice nor a heartbeat) while the engine is
	// connected before the engine says it went silent and that the
	// invocation waits for redelivery. Default 10 seconds: two of a
	// worker's heartbeats, and less than a worker's default AckWait (15
	// seconds), after which the server hands the invocation on.
	Silence time.Duration
	// MaxBatch bounds how many invocations go in one message: those the
	// engine is asked for while it publishes one go together (see
	// [TypeInvocations]). Default [MaxBatchInvocations], at most that; 1
	// sends every invocation in a message of its own.
	MaxBatch int
	// NoWorkerAfter is how long an invocation may wait untaken before the
	// engine looks whether any worker pulls from the shared consumer; it
	// says so (once, until a worker takes something) when twice in a row
	// none does. Default 5 seconds.
	NoWorkerAfter time.Duration
}

// Kinds of [Notice].
const (
	NoticeDisconnected = "disconnected" // the engine lost the server; it reconnects
	NoticeReconnected  = "reconnected"  // the engine has the server again
	NoticeNoWorker     = "no-worker"    // an invocation waits and no worker pulls from the queue
	NoticeSilent       = "silent"       // the worker that took an invocation went silent
	NoticeTaken        = "taken"        // an invocation was taken again, after a silence or by another worker
)

// Notice is something an engine noticed, for a person watching a run.
// Worker is the key a worker names itself by in its notices and
// heartbeats: unverified, information only.
type Notice struct {
	Kind   string
	Node   string // the invocation's node, for the kinds about one
	ID     string // the invocation's id, likewise
	Worker string
	Text   string // one line, for people
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
	gone  *forgetter   // answered invocations, taken off the queue
	queue *dispatcher  // invocations on their way to the work queue

	cons     jetstream.ConsumeContext
	consName string
	adv      *nats.Subscription
	beats    *nats.Subscription
	wants    *nats.Subscription
	advising chan struct{} // max-deliveries advisories being looked up

	conn     sync.Mutex
	downAt   time.Time // when the server was lost; zero while connected
	upAt     time.Time // when it was last regained
	outages  []outage  // ended outages, the last maxOutages of them
	noWorker bool      // the engine said no worker consumes, and none took anything since

	mu      sync.Mutex
	waiting map[string]*waiter // by invocation id
	bySeq   map[uint64]*sent   // work stream sequence -> what it holds
	closed  chan struct{}
	once    sync.Once
}

// waiter is one Invoke waiting for its notices and outcome.
type waiter struct {
	sigs     *ledger.Signatures // the scheduler's, for a batch's receipts (see precheck)
	events   chan event
	done     chan struct{} // closed when Invoke returns
	answered bool          // a reply came; guarded by the engine's mu
}

// event is what the engine hears about an invocation: a reply, a reply
// that did not decode, the consumer giving up on it, or a heartbeat.
type event struct {
	reply      *wireReply
	err        error
	deliveries uint64
	beat       string // a heartbeat's worker
}

// reconnectGrace is how long after regaining the server the engine does
// not look for workers: their pulls went with the server, and they renew
// them within their fetch wait (workerFetchWait).
const reconnectGrace = 2 * workerFetchWait

// roughly is d for a person: to the second, or to a tenth below one.
func roughly(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// outage is a time the engine had no server.
type outage struct{ from, to time.Time }

// maxOutages bounds the ended outages an engine remembers.
const maxOutages = 64

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
	if opts.Notify == nil {
		opts.Notify = func(Notice) {}
	}
	if opts.Silence <= 0 {
		opts.Silence = 10 * time.Second
	}
	if opts.NoWorkerAfter <= 0 {
		opts.NoWorkerAfter = 5 * time.Second
	}
	if opts.MaxBatch <= 0 || opts.MaxBatch > MaxBatchInvocations {
		opts.MaxBatch = MaxBatchInvocations
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
		waiting: map[string]*waiter{}, bySeq: map[uint64]*sent{}, closed: make(chan struct{}),
		put: put,
	}
	e.queue = &dispatcher{e: e, max: opts.MaxBatch}
	e.advising = make(chan struct{}, 4)
	e.gone = newForgetter(nc, work, e.workersAckWait, e.closed)
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
	if e.beats, err = nc.Subscribe(opts.beatPrefix()+e.id+".*", e.onBeat); err != nil {
		e.Close()
		return nil, fmt.Errorf("natsengine: %w", err)
	}
	if e.wants, err = nc.Subscribe(opts.wantSubject(e.id), e.onWant); err != nil {
		e.Close()
		return nil, fmt.Errorf("natsengine: %w", err)
	}
	e.watchConnection(nc)
	// The server has the subscriptions before New returns: a question
	// or a heartbeat sent the moment after reaches them.
	_ = nc.FlushTimeout(5 * time.Second)
	return e, nil
}

// watchConnection follows nc's disconnections and reconnections (after
// whatever handlers nc had), so that the engine can say when it lost
// and regained the server and a timeout can say for how long it had
// none.
func (e *Engine) watchConnection(nc *nats.Conn) {
	prevDown, prevUp := nc.Opts.DisconnectedErrCB, nc.Opts.ReconnectedCB
	nc.SetDisconnectErrHandler(func(c *nats.Conn, err error) {
		if prevDown != nil {
			prevDown(c, err)
		}
		e.conn.Lock()
		first := e.downAt.IsZero()
		if first {
			e.downAt = time.Now()
		}
		e.conn.Unlock()
		select {
		case <-e.closed:
			return
		default:
		}
		if first {
			text := "lost the NATS server"
			if err != nil {
				text += " (" + err.Error() + ")"
			}
			e.opts.Notify(Notice{Kind: NoticeDisconnected, Text: text + "; reconnecting"})
		}
	})
	nc.SetReconnectHandler(func(c *nats.Conn) {
		if prevUp != nil {
			prevUp(c)
		}
		now := time.Now()
		e.conn.Lock()
		from := e.downAt
		if !from.IsZero() {
			e.outages = append(e.outages, outage{from, now})
			if len(e.outages) > maxOutages {
				e.outages = e.outages[len(e.outages)-maxOutages:]
			}
		}
		e.downAt, e.upAt = time.Time{}, now
		e.conn.Unlock()
		text := "reconnected to the NATS server " + c.ConnectedUrlRedacted()
		if !from.IsZero() {
			text += fmt.Sprintf(" after %v", now.Sub(from).Round(time.Second))
		}
		e.opts.Notify(Notice{Kind: NoticeReconnected, Text: text})
	})
}

// connected reports whether the engine has the server, and since when
// it last regained it (zero if it never lost it).
func (e *Engine) connected() (bool, time.Time) {
	e.conn.Lock()
	defer e.conn.Unlock()
	return e.downAt.IsZero(), e.upAt
}

// unreachable is how long, since from, the engine had no server.
func (e *Engine) unreachable(from time.Time) time.Duration {
	now := time.Now()
	e.conn.Lock()
	defer e.conn.Unlock()
	var d time.Duration
	add := func(a, b time.Time) {
		if a.Before(from) {
			a = from
		}
		if b.After(a) {
			d += b.Sub(a)
		}
	}
	for _, o := range e.outages {
		add(o.from, o.to)
	}
	if !e.downAt.IsZero() {
		add(e.downAt, now)
	}
	return d
}

// ID returns the engine's id: the ENGINE token of its result subjects.
func (e *Engine) ID() string { return e.id }

// Close stops reading results and removes the engine's consumer; an
// Invoke still waiting returns an error.
func (e *Engine) Close() error {
	e.once.Do(func() {
		close(e.closed)
		e.gone.flush(5 * time.Second)
		if e.adv != nil {
			_ = e.adv.Unsubscribe()
		}
		if e.beats != nil {
			_ = e.beats.Unsubscribe()
		}
		if e.wants != nil {
			_ = e.wants.Unsubscribe()
		}
		if e.cons != nil {
			e.cons.Stop()
		}
		e.deleteConsumer()
	})
	return nil
}

func (e *Engine) deleteConsumer() {
	if !e.nc.IsConnected() {
		return // its InactiveThreshold removes it
	}
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
	// The package's and the workspace's blocks go to the blocks bucket,
	// those not there yet: a worker fetches what it does not have.
	if err := e.put.invocation(ctx, inv); err != nil {
		return scheduler.Outcome{}, fmt.Errorf("natsengine: node %s: %w", inv.Node, err)
	}
	id := newID()
	w := &waiter{sigs: inv.Signatures, events: make(chan event, 8), done: make(chan struct{})}
	e.mu.Lock()
	e.waiting[id] = w
	e.mu.Unlock()
	var msg *sent // the work message that holds it, once published
	settled := false
	defer func() {
		close(w.done)
		e.mu.Lock()
		delete(e.waiting, id)
		e.mu.Unlock()
	}()
	fail := func(format string, args ...any) (scheduler.Outcome, error) {
		return scheduler.Outcome{}, fmt.Errorf("natsengine: node %s: %w", inv.Node, fmt.Errorf(format, args...))
	}
	// abandon tells workers to stop the invocation and, when nothing else
	// in its message is open, takes the message off the queue.
	abandon := func() {
		if !settled {
			settled = true
			e.abandon(id, msg, e.settle(msg))
		}
	}
	deadline := time.Now().Add(e.opts.Timeout)
	req := &Request{ID: id, Reply: e.opts.resultPrefix() + e.id + "." + id, Deadline: deadline, Invocation: inv}
	data, err := EncodeRequest(req)
	if err != nil {
		return fail("%w", err)
	}
	published := time.Now() // or first tried: a publish waits for the server
	msg, err = e.queue.publish(ctx, id, data, deadline)
	if err != nil {
		if down := e.unreachable(published); down > 0 {
			return fail("publish: the NATS server was unreachable for %v of the last %v: %w", down.Round(time.Second), time.Since(published).Round(time.Second), err)
		}
		return fail("publish: %w", err)
	}

	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	tick := time.NewTicker(max(min(e.opts.Silence, e.opts.NoWorkerAfter)/4, 10*time.Millisecond))
	defer tick.Stop()
	var (
		worker     string    // the worker that last said it took it
		heard      time.Time // when a worker last said anything about it
		silent     bool      // the engine said the worker went silent
		checked    time.Time // when the engine last looked for workers
		idleChecks int       // consecutive looks that found no worker pulling
		noWorker   bool      // the last look found none
		notice     = func(kind, w, text string) {
			e.opts.Notify(Notice{Kind: kind, Node: inv.Node, ID: id, Worker: w, Text: text})
		}
		heardFrom = func(w string) {
			now := time.Now()
			switch {
			case silent:
				notice(NoticeTaken, w, fmt.Sprintf("node %s: worker %s has it now", inv.Node, w))
			case worker != "" && w != worker:
				notice(NoticeTaken, w, fmt.Sprintf("node %s: worker %s took it over from worker %s", inv.Node, w, worker))
			}
			worker, heard, silent = w, now, false
			e.sawWorker()
		}
	)
	for {
		select {
		case <-ctx.Done():
			abandon()
			return fail("%w", context.Cause(ctx))
		case <-e.closed:
			abandon()
			return fail("engine closed")
		case <-timer.C:
			abandon()
			return fail("%s", e.timeoutReason(published, worker, heard, silent, noWorker))
		case now := <-tick.C:
			up, upAt := e.connected()
			if !up {
				continue // heartbeats and consumer info wait for the server
			}
			switch {
			case worker != "":
				// Heartbeats missed while the engine had no server do
				// not count against the worker.
				since := heard
				if upAt.After(since) {
					since = upAt
				}
				if !silent && now.Sub(since) > e.opts.Silence {
					silent = true
					notice(NoticeSilent, worker, fmt.Sprintf("node %s: worker %s took it and went silent (not heard from for %v); waiting for redelivery to another worker", inv.Node, worker, roughly(now.Sub(since))))
				}
			case !upAt.IsZero() && now.Sub(upAt) < max(e.opts.NoWorkerAfter, reconnectGrace):
				// Workers' pulls went with the server; they renew them
				// within their fetch wait.
				idleChecks = 0
			case now.Sub(published) >= e.opts.NoWorkerAfter/2 && now.Sub(checked) >= e.opts.NoWorkerAfter/2:
				checked = now
				none, why := e.noWorkers(ctx)
				if none {
					idleChecks++
				} else {
					idleChecks = 0
				}
				noWorker = idleChecks >= 2
				if noWorker && e.warnNoWorker() {
					notice(NoticeNoWorker, "", why)
				}
			}
		case ev := <-w.events:
			switch {
			case ev.err != nil:
				abandon()
				return fail("%w", ev.err)
			case ev.deliveries > 0:
				abandon()
				return fail("handed to workers %d times without an outcome (the consumer's MaxDeliver)", ev.deliveries)
			case ev.beat != "":
				heardFrom(ev.beat)
				continue
			}
			r := ev.reply
			switch r.State {
			case StateStarted:
				heardFrom(r.Worker)
			case StateError, StateDone:
				// Off the queue once nothing in its message is open,
				// should the worker's ack be lost (it died, a failover
				// dropped it): handed out again, the invocation would run
				// again after its acceptance.
				settled = true
				if e.settle(msg) {
					e.gone.add(msg.seq)
				}
				if r.State == StateError {
					return fail("worker %s: %s", r.Worker, r.Error)
				}
				return e.outcome(ctx, inv, id, r)
			default:
				abandon()
				return fail("%w: worker %s sent state %q", ErrRefused, r.Worker, r.State)
			}
		}
	}
}

// publish puts a work message (one invocation, or a batch of them) on
// the work queue under token, its subject's last token. While the engine has no
// server (or the server no answer) it tries again until the deadline:
// the message id makes a repeated publish a duplicate the server drops.
func (e *Engine) publish(ctx context.Context, token string, data []byte, deadline time.Time) (*jetstream.PubAck, error) {
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ack, err := e.js.Publish(pctx, e.opts.workSubject(token), data, jetstream.WithMsgID(token), jetstream.WithExpectStream(e.opts.Stream))
		cancel()
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) || !transient(err) {
			return ack, err
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-e.closed:
			return nil, errors.New("engine closed")
		case <-time.After(time.Second):
		}
	}
}

// transient reports whether err is one that waiting for the server may
// cure: no connection, no answer in time, no responder yet.
func transient(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, nats.ErrDisconnected) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// noWorkers looks at the workers' shared consumer: it reports whether no
// worker pulls from it and none holds a message, and says so in a line.
func (e *Engine) noWorkers(ctx context.Context) (bool, string) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	hint := "start one with 'hg worker --nats URL'"
	c, err := e.js.Consumer(cctx, e.opts.Stream, e.opts.Consumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return true, fmt.Sprintf("no worker has ever served stream %s: its consumer %s does not exist; %s", e.opts.Stream, e.opts.Consumer, hint)
	}
	if err != nil {
		return false, ""
	}
	info := c.CachedInfo()
	if info.NumWaiting > 0 || info.NumAckPending > 0 {
		return false, ""
	}
	return true, fmt.Sprintf("no worker is consuming from stream %s (consumer %s: none waiting, none working); %s", e.opts.Stream, e.opts.Consumer, hint)
}

// warnNoWorker reports whether to say that no worker consumes: once,
// until a worker takes something again.
func (e *Engine) warnNoWorker() bool {
	e.conn.Lock()
	defer e.conn.Unlock()
	if e.noWorker {
		return false
	}
	e.noWorker = true
	return true
}

// sawWorker notes that a worker took something.
func (e *Engine) sawWorker() {
	e.conn.Lock()
	e.noWorker = false
	e.conn.Unlock()
}

// timeoutReason says why an invocation got no outcome within the
// timeout: the server unreachable, no worker, or a worker gone silent.
func (e *Engine) timeoutReason(published time.Time, worker string, heard time.Time, silent, noWorker bool) string {
	var b strings.Builder
	if down := e.unreachable(published); down > 0 {
		fmt.Fprintf(&b, "the NATS server was unreachable for %v of the last %v; ", down.Round(time.Second), time.Since(published).Round(time.Second))
	}
	switch {
	case worker == "" && noWorker:
		fmt.Fprintf(&b, "not picked up by any worker within %v: no worker is consuming from stream %s (consumer %s); start one with 'hg worker --nats URL'", e.opts.Timeout, e.opts.Stream, e.opts.Consumer)
	case worker == "":
		fmt.Fprintf(&b, "not picked up by any worker within %v (is 'hg worker' running on stream %s?)", e.opts.Timeout, e.opts.Stream)
	case silent:
		fmt.Fprintf(&b, "worker %s took it and went silent (not heard from for %v); no other worker took it since", worker, roughly(time.Since(heard)))
	default:
		fmt.Fprintf(&b, "worker %s took it but sent no outcome within %v (last heard from %v ago)", worker, e.opts.Timeout, roughly(time.Since(heard)))
	}
	return b.String()
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

// abandon tells workers to stop an invocation and, if remove, removes
// its message (msg, if published) from the work queue.
func (e *Engine) abandon(id string, msg *sent, remove bool) {
	_ = e.nc.Publish(e.opts.cancelSubject(id), nil)
	if msg == nil || !remove {
		return // not published, or others of its message are open
	}
	if !e.nc.IsConnected() {
		// No server to ask: a worker that takes the message later
		// drops it, past its deadline.
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = e.work.DeleteMsg(ctx, msg.seq)
}

// workersAckWait returns the ack wait of the workers' consumer.
func (e *Engine) workersAckWait(ctx context.Context) (time.Duration, error) {
	c, err := e.js.Consumer(ctx, e.opts.Stream, e.opts.Consumer)
	if err != nil {
		return 0, err
	}
	return c.CachedInfo().Config.AckWait, nil
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
	if isBatchToken(id) {
		e.onBatch(m.Subject(), m.Data())
		return
	}
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
	e.hand(w, ev)
}

// hand gives an event to the Invoke waiting for it, noting first that
// its invocation was answered if the event is a reply that ends it (so
// that a batch handed out again does not run it again: see
// [Engine.onWant]).
func (e *Engine) hand(w *waiter, ev event) {
	if ev.reply != nil && (ev.reply.State == StateDone || ev.reply.State == StateError) {
		e.mu.Lock()
		w.answered = true
		e.mu.Unlock()
	}
	select {
	case w.events <- ev:
	case <-w.done:
	}
}

// onBeat hands a worker's heartbeat to the Invoke waiting for it. A
// heartbeat is information only: it moves what the engine says about
// an invocation (who has it, whether it went silent), never what it
// accepts. One that does not decode strictly, or names another
// invocation than its subject, is dropped.
func (e *Engine) onBeat(m *nats.Msg) {
	id := lastToken(m.Subject)
	if isBatchToken(id) {
		e.onBeats(m)
		return
	}
	e.mu.Lock()
	w := e.waiting[id]
	e.mu.Unlock()
	if w == nil {
		return
	}
	hb, err := decodeHeartbeat(m.Data)
	if err == nil && hb.ID != id {
		err = fmt.Errorf("%w: heartbeat for %s on the subject of %s", ErrRefused, hb.ID, id)
	}
	if err != nil {
		e.opts.Log("natsengine: heartbeat on %s: %v", m.Subject, err)
		return
	}
	e.heard(id, hb.Worker)
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
	if a.Deliveries == 0 {
		a.Deliveries = 1
	}
	e.mu.Lock()
	var ws []*waiter
	msg := e.bySeq[a.StreamSeq]
	if msg != nil {
		for _, id := range msg.ids {
			if w := e.waiting[id]; w != nil {
				ws = append(ws, w)
			}
		}
	}
	e.mu.Unlock()
	if msg == nil {
		// Not a message this engine published: one a worker queued again
		// on its own from a batch handed out again (worker.split), or
		// another engine's. Its subject names its invocation.
		select {
		case e.advising <- struct{}{}: // a few at a time; more are dropped
			go func() {
				defer func() { <-e.advising }()
				e.adviseQueuedAgain(a.StreamSeq, a.Deliveries)
			}()
		default:
			e.opts.Log("natsengine: max deliveries of message %d: too many looked up at once, dropped", a.StreamSeq)
		}
		return
	}
	for _, w := range ws {
		e.hand(w, event{deliveries: a.Deliveries})
	}
}

// adviseQueuedAgain fails the invocation of the work message at seq,
// which the consumer gave up on, if it is one this engine waits for.
func (e *Engine) adviseQueuedAgain(seq, deliveries uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	raw, err := e.work.GetMsg(ctx, seq)
	if err != nil {
		e.opts.Log("natsengine: max deliveries of message %d: %v", seq, err)
		return
	}
	// Only a member queued again on its own, as a worker's split makes
	// it: its message id is its invocation id.
	id := lastToken(raw.Subject)
	if raw.Header.Get(queuedAgainHeader) == "" || raw.Header.Get(jetstream.MsgIDHeader) != id {
		return
	}
	e.mu.Lock()
	w := e.waiting[id]
	e.mu.Unlock()
	if w != nil {
		e.hand(w, event{deliveries: deliveries})
	}
}

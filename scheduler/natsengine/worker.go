package natsengine

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// WorkerOptions configure [Serve].
type WorkerOptions struct {
	Names
	// Key signs the receipts of the invocations this worker runs; a
	// scheduler accepts them only if it trusts its public key. Required.
	Key ed25519.PrivateKey
	// Jobs is how many invocations run at once; default 1. The worker
	// takes a message from the queue only when a job slot is free.
	Jobs int
	// Adapter answers slots; nil makes every slot call fail.
	Adapter haygent.Adapter
	// MaxDeliver bounds how many times an invocation is handed out (to
	// this or another worker) when workers die or cannot publish its
	// outcome; default 3. It is a setting of the shared consumer: the
	// last worker to start sets it.
	MaxDeliver int
	// AckWait is how long a worker may stay silent about a message
	// before it is handed to another; a running invocation is kept
	// alive by progress acks every AckWait/3. Default 15 seconds, so
	// that the work of a worker that died (SIGKILL, a lost machine)
	// goes to another within seconds. It is a setting of the shared
	// consumer, like MaxDeliver.
	AckWait time.Duration
	// InlineLimit is the largest reply body sent as is; bigger outcomes
	// go through the Object Store. Default as [Options.InlineLimit].
	InlineLimit int
	// Dir is where packages are unpacked; default the system's temporary
	// directory. Serve removes what it unpacked when it returns, and on
	// start what workers that were killed left there.
	Dir string
	// Events, if set, is told of each thing the worker does or meets
	// (see [WorkerEvent]), one call per event, from several goroutines.
	Events func(WorkerEvent)
	// Log, if set and Events is not, is told of each event as a line
	// ([WorkerEvent.String]).
	Log func(format string, args ...any)
	// Workspaces bound the workspaces this worker fetches and the cache
	// of their blocks.
	Workspaces WorkspaceOptions
}

// Events of a [WorkerEvent].
const (
	EventConnected  = "connected"   // Serve reaches the queue
	EventTook       = "took"        // an invocation was taken
	EventDone       = "done"        // its outcome was published (the message is acked once all of it is settled)
	EventFailed     = "failed"      // it could not be carried out; the engine was told
	EventRefused    = "refused"     // the message did not decode or verify
	EventDropped    = "dropped"     // it came after its engine's deadline
	EventStopped    = "stopped"     // its engine gave up on it
	EventSkipped    = "skipped"     // handed out again, its engine said it has its outcome: not run again
	EventHandedBack = "handed back" // the worker is stopping or could not answer: redelivered
	EventError      = "error"       // something failed that the worker goes on after
)

// WorkerEvent is one line of a worker's log.
type WorkerEvent struct {
	Time    time.Time
	Event   string // one of the Event constants, or the caller's own ("disconnected", ...)
	ID      string // the invocation, if the event is about one
	Run     string
	Node    string
	Receipt string // done
	Error   string
}

// String is the event as a line, without its time: "took ID run R node N".
func (ev WorkerEvent) String() string {
	var b strings.Builder
	b.WriteString(ev.Event)
	if ev.ID != "" {
		b.WriteString(" " + ev.ID)
	}
	for _, f := range []struct{ k, v string }{{"run", ev.Run}, {"node", ev.Node}, {"receipt", ev.Receipt}} {
		if f.v != "" {
			b.WriteString(" " + f.k + " " + f.v)
		}
	}
	if ev.Error != "" {
		b.WriteString(": " + ev.Error)
	}
	return b.String()
}

// workerFetchWait bounds a worker's wait for a message: a pull request
// lost with the server is renewed after it.
const workerFetchWait = 5 * time.Second

// worker is one Serve in progress.
type worker struct {
	o     WorkerOptions
	nc    *nats.Conn
	js    jetstream.JetStream
	obs   jetstream.ObjectStore
	pub   string // the key's text form, in replies
	limit int
	base  string // unpacked packages, one directory per package CID

	ws    *fetcher // workspaces: the cache of their blocks, the blocks bucket
	batch *batcher // replies to engines that read batches

	mu      sync.Mutex
	pkgs    map[cid.Cid]*pkgEntry
	running map[string]context.CancelFunc // by invocation id
	gaveUp  cancelledSet                  // invocations their engines gave up on
}

// pkgEntry is a package this worker unpacked and loaded, kept for the
// life of Serve.
type pkgEntry struct {
	ready  chan struct{}
	err    error
	blocks []cas.Block
	set    map[cid.Cid]bool
	pkg    *haygent.Package
}

// Serve takes invocations from the work queue and runs them until ctx
// ends: each message goes to one worker of all those serving the same
// consumer. A message that does not decode strictly, or whose package
// blocks do not match their CIDs, is refused (terminated, and the engine
// told why). An invocation runs with a [scheduler.Local] engine signing
// with w.Key; its outcome is published, then the message acked. An
// invocation that cannot be carried out is answered with an error and
// terminated; one this worker could not answer (it is shutting down, or
// publishing failed) is handed back for redelivery, at most MaxDeliver
// times in all. When ctx ends, Serve stops taking messages, stops its
// running invocations (handing them back), and returns nil.
func Serve(ctx context.Context, nc *nats.Conn, o WorkerOptions) error {
	if len(o.Key) != ed25519.PrivateKeySize {
		return errors.New("natsengine: a worker needs a signing key")
	}
	o.Names = o.Names.withDefaults()
	if o.Jobs < 1 {
		o.Jobs = 1
	}
	if o.MaxDeliver < 1 {
		o.MaxDeliver = 3
	}
	if o.AckWait <= 0 {
		o.AckWait = 15 * time.Second
	}
	if o.Events == nil {
		switch logf := o.Log; logf {
		case nil:
			o.Events = func(WorkerEvent) {}
		default:
			o.Events = func(ev WorkerEvent) { logf("%s", ev.String()) }
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("natsengine: %w", err)
	}
	obs, err := setup(ctx, js, o.Names)
	if err != nil {
		return err
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, o.Stream, jetstream.ConsumerConfig{
		Durable: o.Consumer, FilterSubject: o.Prefix + ".work.*",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: o.AckWait, MaxDeliver: o.MaxDeliver,
		Description: "hg: the workers, each invocation to one of them",
	})
	if err != nil {
		return fmt.Errorf("natsengine: work consumer: %w", err)
	}
	ws, err := newFetcher(ctx, js, o)
	if err != nil {
		return err
	}
	// The packages go to a directory this process owns and locks
	// (cas.MkdirOwnedTemp); a worker that was killed left its own, which
	// is removed first.
	dir := o.Dir
	if dir == "" {
		dir = os.TempDir()
	}
	cas.SweepDeadTemps(dir)
	base, release, err := cas.MkdirOwnedTemp(dir)
	if err != nil {
		return err
	}
	defer func() {
		os.RemoveAll(base)
		release()
	}()
	w := &worker{
		o: o, nc: nc, js: js, obs: obs, base: base,
		pub:   ledger.FormatPublicKey(o.Key.Public().(ed25519.PublicKey)),
		limit: inlineLimit(o.InlineLimit, nc.MaxPayload()),
		pkgs:  map[cid.Cid]*pkgEntry{}, running: map[string]context.CancelFunc{},
		ws: ws,
	}
	w.batch = newBatcher(ctx, w.limit, w.publishReply)
	sub, err := nc.Subscribe(o.cancelSubject("*"), w.onCancel)
	if err != nil {
		return fmt.Errorf("natsengine: %w", err)
	}
	defer sub.Unsubscribe()
	w.event(WorkerEvent{Event: EventConnected})

	slots := newJobSlots(ctx, o.Jobs)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		if !slots.take(ctx, false) {
			return nil
		}
		fctx, cancel := context.WithTimeout(ctx, workerFetchWait)
		msg, err := cons.Next(jetstream.FetchContext(fctx))
		cancel()
		if err != nil {
			slots.put()
			switch {
			case ctx.Err() != nil:
				return nil
			case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded), errors.Is(err, jetstream.ErrNoMessages):
			default:
				if nc.IsConnected() { // else the connection's own events say it
					w.event(WorkerEvent{Event: EventError, Error: "fetch: " + err.Error()})
				}
				select {
				case <-time.After(time.Second):
				case <-ctx.Done():
					return nil
				}
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if isBatchToken(lastToken(msg.Subject())) {
				w.handleBatch(ctx, msg, slots)
				return
			}
			defer slots.put()
			w.handle(ctx, msg)
		}()
	}
}

// settlement is what became of an invocation a worker was handed, and so
// of its message.
type settlement int

const (
	answered settlement = iota // its outcome or error was told to its engine: ack
	failed                     // its error was told to its engine: terminate
	ended                      // refused, dropped, stopped by its engine: terminate
	handBack                   // the worker is stopping: hand it back at once
	retry                      // its engine could not be told: hand it back for later
)

// settleMsg acks, terminates or hands back msg as s says.
func settleMsg(msg jetstream.Msg, s settlement, reason string) error {
	switch s {
	case answered:
		// A plain ack, not one the server confirms: the engine takes an
		// answered invocation off the queue itself (its sweep of answered
		// invocations), so an ack lost with a server costs nothing but
		// that delete, and waiting for the server's word would cost a
		// message and a round trip an invocation for nothing.
		return msg.Ack()
	case failed, ended:
		return msg.TermWithReason(reason)
	case handBack:
		return msg.Nak()
	default:
		return msg.NakWithDelay(2 * time.Second)
	}
}

// handle carries out a work message of one invocation.
func (w *worker) handle(ctx context.Context, msg jetstream.Msg) {
	req := w.judge(ctx, msg, msg.Data(), lastToken(msg.Subject()), nil)
	if req == nil {
		_ = msg.TermWithReason("refused")
		return
	}
	beats := w.newBeats()
	stop := keepAlive(msg, beatPeriod(w.o.AckWait), beats.beat)
	defer stop()
	if len(w.stillWanted(ctx, msg, []*Request{req})) == 0 {
		_ = msg.Ack() // answered before, on an earlier delivery
		return
	}
	// The first heartbeat tells the engine who took it.
	beats.add(req)
	beats.beat()
	s, reason := w.run(ctx, msg, req)
	beats.remove(req)
	if err := settleMsg(msg, s, reason); err != nil && s == answered {
		w.event(WorkerEvent{Event: EventError, ID: req.ID, Run: req.Invocation.Run, Node: req.Invocation.Node, Error: "ack: " + err.Error()})
	}
}

// judge decodes a request body (a message's, or a batch member's) and
// returns it, or nil when it is refused: it does not decode strictly or
// verify, it names an invocation other than subjectID (when not empty),
// its reply subject is not a result subject, or its id is in seen (a
// batch's ids so far; nil for a message of one). Its engine is told why
// when it can be named without answering for another invocation.
func (w *worker) judge(ctx context.Context, msg jetstream.Msg, body []byte, subjectID string, seen map[string]bool) *Request {
	req, err := DecodeRequest(body)
	if err == nil && subjectID != "" && subjectID != req.ID {
		err = fmt.Errorf("%w: invocation %s on the subject %s", ErrRefused, req.ID, msg.Subject())
	}
	switch {
	case req != nil && seen[req.ID]:
		w.event(WorkerEvent{Event: EventRefused, ID: req.ID, Error: "named twice in one batch"})
		return nil
	case req != nil && !w.validReply(req.ID, req.Reply):
		w.event(WorkerEvent{Event: EventRefused, ID: req.ID, Error: fmt.Sprintf("reply subject %q is not a result subject", req.Reply)})
		return nil
	}
	if req != nil && seen != nil {
		seen[req.ID] = true
	}
	if err != nil {
		w.refuse(ctx, msg, req, err)
		return nil
	}
	return req
}

// refuse says that a message or a member of a batch did not decode, and
// tells its engine if it decoded far enough to name it.
func (w *worker) refuse(ctx context.Context, msg jetstream.Msg, req *Request, err error) {
	ev := WorkerEvent{Event: EventRefused, Error: err.Error()}
	if req != nil {
		ev.ID = req.ID
	}
	w.event(ev)
	if req != nil {
		w.answer(ctx, msg, req, wireReply{State: StateError, Error: "refused: " + err.Error()}, nil)
	}
}

// run carries out one invocation, decoded and checked, and answers its
// engine. It returns what became of it, and why, for a message to
// terminate.
func (w *worker) run(ctx context.Context, msg jetstream.Msg, req *Request) (settlement, string) {
	inv := req.Invocation
	if time.Now().After(req.Deadline) {
		w.event(WorkerEvent{Event: EventDropped, ID: req.ID, Run: inv.Run, Node: inv.Node, Error: "its engine gave up at " + req.Deadline.Format(time.RFC3339)})
		return ended, "past its deadline"
	}
	if w.gaveUp.has(req.ID) {
		w.event(WorkerEvent{Event: EventStopped, ID: req.ID, Run: inv.Run, Node: inv.Node, Error: "its engine gave up on it before it started"})
		return ended, "cancelled by its engine"
	}
	runCtx, cancel := context.WithDeadline(ctx, req.Deadline)
	defer cancel()
	w.mu.Lock()
	w.running[req.ID] = cancel
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.running, req.ID)
		w.mu.Unlock()
	}()
	w.event(WorkerEvent{Event: EventTook, ID: req.ID, Run: inv.Run, Node: inv.Node})

	ent, err := w.pkg(runCtx, req)
	var out scheduler.Outcome
	var wsSet map[cid.Cid]bool
	if err == nil && inv.Workspace.Defined() {
		if inv.WorkspaceBlocks, wsSet, err = w.ws.tree(runCtx, inv.Workspace); err != nil {
			err = fmt.Errorf("workspace %s: %w", inv.Workspace, err)
		}
	}
	if err == nil {
		inv.PackageBlocks = ent.blocks
		local := &scheduler.Local{Key: w.o.Key, Adapter: w.o.Adapter,
			Package: func(scheduler.Invocation) (*haygent.Package, error) { return ent.pkg, nil }}
		out, err = local.Invoke(runCtx, inv)
	}
	switch {
	case ctx.Err() != nil:
		w.event(WorkerEvent{Event: EventHandedBack, ID: req.ID, Run: inv.Run, Node: inv.Node, Error: "the worker is stopping"})
		return handBack, ""
	case runCtx.Err() != nil:
		w.event(WorkerEvent{Event: EventStopped, ID: req.ID, Run: inv.Run, Node: inv.Node, Error: "its engine gave up"})
		return ended, "cancelled by its engine"
	case err != nil:
		w.event(WorkerEvent{Event: EventFailed, ID: req.ID, Run: inv.Run, Node: inv.Node, Error: err.Error()})
		if w.answer(ctx, msg, req, wireReply{State: StateError, Error: err.Error()}, nil) {
			return failed, "failed"
		}
		w.event(WorkerEvent{Event: EventHandedBack, ID: req.ID, Run: inv.Run, Node: inv.Node, Error: "could not tell its engine"})
		return retry, ""
	}
	// The engine has the package and the workspace: their blocks are not
	// sent back.
	blocks := withoutBlocks(withoutBlocks(out.Blocks, ent.set), wsSet)
	r := wireReply{State: StateDone, Receipt: &cas.Link{Cid: out.Receipt}}
	if !w.answer(ctx, msg, req, r, blocks) {
		w.event(WorkerEvent{Event: EventHandedBack, ID: req.ID, Run: inv.Run, Node: inv.Node, Error: "could not publish its outcome"})
		return retry, ""
	}
	w.event(WorkerEvent{Event: EventDone, ID: req.ID, Run: inv.Run, Node: inv.Node, Receipt: out.Receipt.String()})
	return answered, ""
}

// answer publishes a reply to the invocation's engine, with blocks; a
// reply too big for a message puts its blocks in the Object Store. It
// reports whether the reply was stored.
func (w *worker) answer(ctx context.Context, msg jetstream.Msg, req *Request, r wireReply, blocks []cas.Block) bool {
	r.Type, r.ID, r.Worker, r.Blocks = TypeReply, req.ID, w.pub, toWire(blocks)
	data, err := cas.Marshal(&r)
	if err == nil && len(data) > w.limit && len(blocks) > 0 {
		var content []byte
		if content, err = encodeBlocks(blocks); err == nil {
			n := uint64(1)
			if meta, merr := msg.Metadata(); merr == nil {
				n = meta.NumDelivered
			}
			r.Object, r.Blocks = "outcome-"+req.ID+"-"+strconv.FormatUint(n, 10), nil
			if _, err = w.obs.PutBytes(ctx, r.Object, content); err == nil {
				data, err = cas.Marshal(&r)
			}
		}
	}
	if err == nil && len(data) > w.limit && r.State == StateError {
		r.Error = r.Error[:min(len(r.Error), 4096)]
		data, err = cas.Marshal(&r)
	}
	if err == nil {
		if req.Batched {
			// With other replies to the same engine, if some wait.
			err = w.batch.send(enginePrefix(req.Reply), req.Reply, req.ID+"-"+r.State, r, data)
		} else {
			err = w.publishReply(ctx, req.Reply, req.ID+"-"+r.State, data)
		}
	}
	if err != nil {
		w.event(WorkerEvent{Event: EventError, ID: req.ID, Error: fmt.Sprintf("reply (%s): %v", r.State, err)})
		return false
	}
	return true
}

// publishReply publishes a reply body under message id msgID (an
// invocation's id and state, or a batch's token), so the server drops a
// second copy, for at most replyTimeout: it is published again,
// replyAttempt at a time, when a try gets no answer (a server shut down
// under it, a cluster electing a new leader), instead of waiting out the
// whole timeout on a request the server lost.
func (w *worker) publishReply(ctx context.Context, subject, msgID string, data []byte) error {
	pctx, cancel := context.WithTimeout(ctx, replyTimeout)
	defer cancel()
	opts := []jetstream.PublishOpt{jetstream.WithExpectStream(w.o.Results), jetstream.WithMsgID(msgID)}
	for {
		actx, acancel := context.WithTimeout(pctx, replyAttempt)
		_, err := w.js.Publish(actx, subject, data, opts...)
		acancel()
		if err == nil || pctx.Err() != nil {
			return err
		}
		select {
		case <-time.After(replyAttempt / 10):
		case <-pctx.Done():
			return err
		}
	}
}

// How long a worker tries to publish a reply, and each try.
const (
	replyTimeout = 30 * time.Second
	replyAttempt = 3 * time.Second
)

// validReply reports whether reply is a result subject of invocation id.
func (w *worker) validReply(id, reply string) bool {
	rest, ok := strings.CutPrefix(reply, w.o.resultPrefix())
	engine, inv, ok2 := strings.Cut(rest, ".")
	return ok && ok2 && validID(engine) && inv == id
}

// pkg returns the invocation's package, unpacked and loaded once per
// package CID. The tree is read from the package CID through blocks that
// were each verified against their own CID, so an entry always holds
// what its CID names.
func (w *worker) pkg(ctx context.Context, req *Request) (*pkgEntry, error) {
	c := req.Invocation.Package
	for {
		w.mu.Lock()
		ent, ok := w.pkgs[c]
		if !ok {
			ent = &pkgEntry{ready: make(chan struct{})}
			w.pkgs[c] = ent
		}
		w.mu.Unlock()
		if ok {
			select {
			case <-ent.ready:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if ent.err == nil {
				return ent, nil
			}
			continue // that message failed; try with this one
		}
		ent.err = w.unpack(ctx, req, ent)
		if ent.err != nil {
			w.mu.Lock()
			delete(w.pkgs, c)
			w.mu.Unlock()
		}
		close(ent.ready)
		return ent, ent.err
	}
}

func (w *worker) unpack(ctx context.Context, req *Request, ent *pkgEntry) error {
	c := req.Invocation.Package
	blocks := req.Invocation.PackageBlocks
	if !req.Inline {
		// From the blocks bucket, each verified against its CID, under
		// the same limits as a workspace.
		var err error
		if blocks, _, err = w.ws.tree(ctx, c); err != nil {
			return fmt.Errorf("package %s: %w", c, err)
		}
	}
	ms := memstore.New()
	defer ms.Close()
	if err := ms.Put(ctx, blocks...); err != nil {
		return err
	}
	dir := filepath.Join(w.base, c.String())
	if err := cas.GetTree(ctx, ms, c, dir, nil); err != nil {
		return fmt.Errorf("package %s: %w", c, err)
	}
	pkg, err := haygent.Load(dir)
	if err != nil {
		return fmt.Errorf("package %s: %w", c, err)
	}
	ent.blocks, ent.pkg = blocks, pkg
	ent.set = make(map[cid.Cid]bool, len(blocks))
	for _, b := range blocks {
		ent.set[b.CID()] = true
	}
	return nil
}

// onCancel stops an invocation its engine gave up on.
func (w *worker) onCancel(m *nats.Msg) {
	id := lastToken(m.Subject)
	if !validID(id) {
		return
	}
	w.gaveUp.add(id)
	w.mu.Lock()
	cancel := w.running[id]
	w.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// event tells the worker's log of ev, stamped now.
func (w *worker) event(ev WorkerEvent) {
	ev.Time = time.Now().UTC()
	w.o.Events(ev)
}

// beatPeriod is how often a running invocation is kept alive and its
// engine told: AckWait/3, and at least every 5 seconds, two of which
// make an engine's default Silence.
func beatPeriod(ackWait time.Duration) time.Duration {
	return min(ackWait/3, 5*time.Second)
}

// keepAlive tells the server every period that msg is still being worked
// on, and calls beat, until the returned function is called.
func keepAlive(msg jetstream.Msg, period time.Duration, beat func()) func() {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				_ = msg.InProgress()
				beat()
			case <-done:
				return
			}
		}
	}()
	return func() { close(done) }
}

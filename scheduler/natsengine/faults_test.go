package natsengine_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/verify"
	"github.com/haygent/hg/scheduler"
	"github.com/haygent/hg/scheduler/natsengine"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The faults a deployment meets: the server gone for a while, a worker
// killed mid-invocation, no worker at all, forged heartbeats, a server
// without JetStream, a killed worker's leftovers. No test here asserts
// how long anything took: waits are short settings, and the checks are
// what the engine says and returns.

// restartable is a JetStream server that can be stopped and started
// again on the same port with the same store, as an outage.
type restartable struct {
	t    *testing.T
	dir  string
	port int
	js   bool
	mu   sync.Mutex
	s    *server.Server
}

func newRestartable(t *testing.T, js bool) *restartable {
	t.Helper()
	r := &restartable{t: t, dir: t.TempDir(), port: -1, js: js}
	r.start()
	r.port = r.s.Addr().(*net.TCPAddr).Port
	t.Cleanup(r.stop)
	return r
}

func (r *restartable) start() {
	r.t.Helper()
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: r.port, JetStream: r.js, StoreDir: r.dir, NoLog: true, NoSigs: true,
	})
	if err != nil {
		r.t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		r.t.Fatal("nats server not ready")
	}
	r.mu.Lock()
	r.s = s
	r.mu.Unlock()
}

func (r *restartable) stop() {
	r.mu.Lock()
	s := r.s
	r.s = nil
	r.mu.Unlock()
	if s != nil {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

func (r *restartable) url() string { return "nats://127.0.0.1:" + strconv.Itoa(r.port) }

// connectForever connects as hg does: it never stops reconnecting; the
// wait between attempts is short for the test.
func connectForever(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name(t.Name()), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// notices collects an engine's notices.
type notices struct {
	mu  sync.Mutex
	all []natsengine.Notice
	ch  chan natsengine.Notice
}

func newNotices() *notices { return &notices{ch: make(chan natsengine.Notice, 100)} }

func (n *notices) add(t *testing.T) func(natsengine.Notice) {
	return func(x natsengine.Notice) {
		t.Logf("notice %s: %s", x.Kind, x.Text)
		n.mu.Lock()
		n.all = append(n.all, x)
		n.mu.Unlock()
		select {
		case n.ch <- x:
		default:
		}
	}
}

func (n *notices) of(kind string) []natsengine.Notice {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []natsengine.Notice
	for _, x := range n.all {
		if x.Kind == kind {
			out = append(out, x)
		}
	}
	return out
}

// wait returns the first notice of kind, or fails the test when ctx ends.
func (n *notices) wait(ctx context.Context, t *testing.T, kind string) natsengine.Notice {
	t.Helper()
	if got := n.of(kind); len(got) > 0 {
		return got[0]
	}
	for {
		select {
		case x := <-n.ch:
			if x.Kind == kind {
				return x
			}
		case <-ctx.Done():
			t.Fatalf("no %s notice", kind)
		}
	}
}

// checkOutcome verifies an outcome's receipt against the given signer.
func checkOutcome(t *testing.T, out scheduler.Outcome, signer ed25519.PrivateKey) {
	t.Helper()
	st := memstore.New()
	ctx := context.Background()
	if err := st.Put(ctx, out.Blocks...); err != nil {
		t.Fatal(err)
	}
	v, err := verify.VerifyReceipt(ctx, st, out.Receipt, []ed25519.PublicKey{pub(signer)})
	if err != nil || !v.OK() || v.Status != ledger.StatusPass {
		t.Fatalf("outcome's receipt: %v %+v", err, v)
	}
}

// The server goes away while a worker and an engine are connected, and
// an invocation is made meanwhile: it is queued once the server is back
// and carried out, and the engine says it lost and regained the server.
func TestServerOutage(t *testing.T) {
	srv := newRestartable(t, true)
	// The outage comes once the worker has its consumer: one stopped
	// in the middle of setting up returns, and no worker would serve.
	connected := make(chan struct{})
	var once sync.Once
	startWorkerOn(t, connectForever(t, srv.url()), natsengine.WorkerOptions{Key: workerKeys[0], AckWait: 2 * time.Second,
		Events: func(ev natsengine.WorkerEvent) {
			t.Logf("worker: %s", ev)
			if ev.Event == natsengine.EventConnected {
				once.Do(func() { close(connected) })
			}
		}})
	<-connected
	seen := newNotices()
	e, err := natsengine.New(connectForever(t, srv.url()), natsengine.Options{Timeout: 3 * time.Minute, Log: t.Logf, Notify: seen.add(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	// Generous: under -race on a loaded two-core machine a JetStream
	// server's restart and the worker's next pull take far longer than
	// they do alone (seconds).
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()

	srv.stop()
	seen.wait(ctx, t, natsengine.NoticeDisconnected)
	type result struct {
		out scheduler.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := e.Invoke(ctx, echoInvocation(t))
		done <- result{out, err}
	}()
	// Many more reconnect attempts than a client makes by default (60)
	// fail before the server is back.
	time.Sleep(4 * time.Second)
	srv.start()
	r := <-done
	if r.err != nil {
		t.Fatalf("Invoke across the outage: %v", r.err)
	}
	checkOutcome(t, r.out, workerKeys[0])
	if len(seen.of(natsengine.NoticeReconnected)) == 0 {
		t.Errorf("no reconnected notice: %+v", seen.all)
	}
}

// A worker that takes an invocation and dies (its connection closed
// mid-invocation, as SIGKILL does) goes silent: the engine says so,
// naming it, and the invocation goes to another worker once the ack
// wait runs out.
func TestSilentWorkerRedelivered(t *testing.T) {
	url := startServer(t)
	seen := newNotices()
	e, err := natsengine.New(connect(t, url), natsengine.Options{Timeout: time.Minute, Silence: 300 * time.Millisecond, Log: t.Logf, Notify: seen.add(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()

	// The doomed worker: it takes the message, says it started, beats
	// once, and its connection drops without an ack.
	doomed := ledger.FormatPublicKey(pub(rogueKey))
	dnc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	djs, _ := jetstream.New(dnc)
	cons, err := djs.CreateOrUpdateConsumer(ctx, "HG_WORK", jetstream.ConsumerConfig{
		Durable: "hg-workers", FilterSubject: "hg.work.*", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 2 * time.Second, MaxDeliver: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	took := make(chan struct{})
	go func() {
		defer close(took)
		msg, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			t.Errorf("doomed worker: %v", err)
			return
		}
		req, err := natsengine.DecodeRequest(msg.Data())
		if err != nil {
			t.Errorf("doomed worker: %v", err)
			return
		}
		started, _ := cas.Marshal(map[string]any{"type": natsengine.TypeReply, "id": req.ID, "state": natsengine.StateStarted, "worker": doomed})
		if _, err := djs.Publish(ctx, req.Reply, started); err != nil {
			t.Errorf("doomed worker: %v", err)
		}
		beat, _ := cas.Marshal(map[string]any{"type": natsengine.TypeHeartbeat, "id": req.ID, "worker": doomed})
		_ = dnc.Publish("hg.beat."+e.ID()+"."+req.ID, beat)
		_ = dnc.Flush()
		dnc.Close() // killed
	}()
	done := make(chan error, 1)
	var out scheduler.Outcome
	go func() {
		var err error
		out, err = e.Invoke(ctx, echoInvocation(t))
		done <- err
	}()
	<-took
	silent := seen.wait(ctx, t, natsengine.NoticeSilent)
	if silent.Worker != doomed || !strings.Contains(silent.Text, doomed) || !strings.Contains(silent.Text, "silent") {
		t.Errorf("silent notice %+v, want one naming %s", silent, doomed)
	}
	// A live worker, which sets the same ack wait, gets it next.
	startWorker(t, url, natsengine.WorkerOptions{Key: workerKeys[0], AckWait: 2 * time.Second})
	if err := <-done; err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	checkOutcome(t, out, workerKeys[0])
	taken := seen.of(natsengine.NoticeTaken)
	if len(taken) == 0 || taken[len(taken)-1].Worker != ledger.FormatPublicKey(pub(workerKeys[0])) {
		t.Errorf("taken notices %+v, want the live worker's", taken)
	}
}

// Heartbeats are information only: forged or odd ones never make the
// engine return an outcome, and the odd ones are dropped as refused.
func TestForgedHeartbeats(t *testing.T) {
	url := startServer(t)
	var mu sync.Mutex
	var logged []string
	seen := newNotices()
	e, err := natsengine.New(connect(t, url), natsengine.Options{
		Timeout: 5 * time.Second, Silence: time.Hour, NoWorkerAfter: time.Hour, Notify: seen.add(t),
		Log: func(format string, args ...any) {
			mu.Lock()
			logged = append(logged, format)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	nc := connect(t, url)
	ids, err := nc.SubscribeSync("hg.work.*") // the invocation's id, as the queue sees it
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.Invoke(context.Background(), echoInvocation(t))
		done <- err
	}()
	m, err := ids.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	id := m.Subject[len("hg.work."):]
	subject := "hg.beat." + e.ID() + "." + id
	forger := ledger.FormatPublicKey(pub(rogueKey))
	good, _ := cas.Marshal(map[string]any{"type": natsengine.TypeHeartbeat, "id": id, "worker": forger})
	odd := [][]byte{
		[]byte("not cbor"),
		mustMarshal(t, map[string]any{"type": natsengine.TypeHeartbeat, "id": strings.Repeat("0", 32), "worker": forger}), // another invocation's id
		mustMarshal(t, map[string]any{"type": natsengine.TypeHeartbeat, "id": id, "worker": "ed25519:nope"}),
		mustMarshal(t, map[string]any{"type": natsengine.TypeHeartbeat, "id": id, "worker": forger, "done": true}), // a field too many
		mustMarshal(t, map[string]any{"type": natsengine.TypeReply, "id": id, "worker": forger}),
		mustMarshal(t, map[string]any{"type": natsengine.TypeReply, "id": id, "state": natsengine.StateDone, "worker": forger}),
	}
	for _, b := range append(odd, good) {
		if err := nc.Publish(subject, b); err != nil {
			t.Fatal(err)
		}
	}
	_ = nc.Flush()
	err = <-done
	if err == nil {
		t.Fatal("Invoke returned an outcome from heartbeats alone")
	}
	if !strings.Contains(err.Error(), "took it but sent no outcome") || !strings.Contains(err.Error(), forger) {
		t.Errorf("Invoke: %v, want a timeout naming the heartbeating worker", err)
	}
	mu.Lock()
	n := 0
	for _, l := range logged {
		if strings.Contains(l, "heartbeat") {
			n++
		}
	}
	mu.Unlock()
	if n != len(odd) {
		t.Errorf("%d heartbeats dropped, want %d (the odd ones)", n, len(odd))
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := cas.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// With no worker at all, the engine says so within its NoWorkerAfter,
// naming the stream and the consumer and how to start one; the timeout
// says the same.
func TestNoWorkerWarning(t *testing.T) {
	url := startServer(t)
	for _, tc := range []struct {
		name   string
		before func(t *testing.T)
	}{
		{"never", func(*testing.T) {}},
		// A worker served once (the consumer exists) and is gone.
		{"gone", func(t *testing.T) {
			nc, err := nats.Connect(url)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				errc <- natsengine.Serve(ctx, nc, natsengine.WorkerOptions{Key: workerKeys[1], Dir: t.TempDir()})
			}()
			js, _ := jetstream.New(nc)
			for {
				if _, err := js.Consumer(context.Background(), "HG_WORK", "hg-workers"); err == nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			cancel()
			<-errc
			nc.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.before(t)
			seen := newNotices()
			e, err := natsengine.New(connect(t, url), natsengine.Options{Timeout: 30 * time.Second, NoWorkerAfter: 200 * time.Millisecond, Log: t.Logf, Notify: seen.add(t)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			go func() {
				_, _ = e.Invoke(ctx, echoInvocation(t))
			}()
			n := seen.wait(ctx, t, natsengine.NoticeNoWorker)
			cancel()
			for _, want := range []string{"HG_WORK", "hg-workers", "hg worker --nats"} {
				if !strings.Contains(n.Text, want) {
					t.Errorf("notice %q does not name %q", n.Text, want)
				}
			}
		})
	}
}

// A server without JetStream is said to be one, by the engine and by a
// worker.
func TestNoJetStream(t *testing.T) {
	srv := newRestartable(t, false)
	nc := connect(t, srv.url())
	if _, err := natsengine.New(nc, natsengine.Options{}); !errors.Is(err, natsengine.ErrNoJetStream) {
		t.Errorf("New: %v, want ErrNoJetStream", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := natsengine.Serve(ctx, nc, natsengine.WorkerOptions{Key: workerKeys[0], Dir: t.TempDir()}); !errors.Is(err, natsengine.ErrNoJetStream) {
		t.Errorf("Serve: %v, want ErrNoJetStream", err)
	}
}

// A worker removes, on start, the directory a killed worker left in the
// same place, and keeps a live one's.
func TestWorkerSweepsDeadWorkersDirs(t *testing.T) {
	url := startServer(t)
	dir := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip("no 'true' to get a dead pid:", err)
	}
	left := filepath.Join(dir, cas.TempPrefix+strconv.Itoa(dead.Process.Pid)+"-killed")
	live := filepath.Join(dir, cas.TempPrefix+strconv.Itoa(os.Getpid())+"-alive")
	for _, d := range []string{left, live} {
		if err := os.MkdirAll(filepath.Join(d, "pkg"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	connected := make(chan struct{}, 1)
	o := natsengine.WorkerOptions{Key: workerKeys[0], Dir: dir, Events: func(ev natsengine.WorkerEvent) {
		if ev.Event == natsengine.EventConnected {
			connected <- struct{}{}
		}
	}}
	nc := connect(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- natsengine.Serve(ctx, nc, o) }()
	select {
	case <-connected:
	case err := <-errc:
		t.Fatalf("Serve: %v", err)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("a dead worker's directory is still there: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a live process's directory went: %v", err)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// startWorkerOn runs Serve on nc until the test ends.
func startWorkerOn(t *testing.T, nc *nats.Conn, o natsengine.WorkerOptions) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	o.Log = func(format string, args ...any) { t.Logf("worker: "+format, args...) }
	go func() { done <- natsengine.Serve(ctx, nc, o) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Errorf("Serve did not return")
		}
	})
}

// A timeout names its cause: the server unreachable for part of the
// wait, or the worker that took the invocation and went silent.
func TestTimeoutNamesCause(t *testing.T) {
	t.Run("outage", func(t *testing.T) {
		srv := newRestartable(t, true)
		seen := newNotices()
		e, err := natsengine.New(connectForever(t, srv.url()), natsengine.Options{Timeout: 2 * time.Second, Log: t.Logf, Notify: seen.add(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		nc := connect(t, srv.url())
		ids, err := nc.SubscribeSync("hg.work.*")
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := e.Invoke(context.Background(), echoInvocation(t))
			done <- err
		}()
		if _, err := ids.NextMsg(20 * time.Second); err != nil {
			t.Fatal(err)
		}
		srv.stop()
		err = <-done
		if err == nil || !strings.Contains(err.Error(), "the NATS server was unreachable for") {
			t.Errorf("Invoke: %v, want the outage named", err)
		}
	})
	t.Run("silent", func(t *testing.T) {
		url := startServer(t)
		e := newEngine(t, url, natsengine.Options{Timeout: 3 * time.Second, Silence: 200 * time.Millisecond})
		nc := connect(t, url)
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cons, err := js.CreateOrUpdateConsumer(ctx, "HG_WORK", jetstream.ConsumerConfig{
			Durable: "hg-workers", FilterSubject: "hg.work.*", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
		silent := ledger.FormatPublicKey(pub(rogueKey))
		go func() {
			msg, err := cons.Next(jetstream.FetchContext(ctx))
			if err != nil {
				return
			}
			req, err := natsengine.DecodeRequest(msg.Data())
			if err != nil {
				return
			}
			started, _ := cas.Marshal(map[string]any{"type": natsengine.TypeReply, "id": req.ID, "state": natsengine.StateStarted, "worker": silent})
			_, _ = js.Publish(ctx, req.Reply, started)
		}()
		_, err = e.Invoke(ctx, echoInvocation(t))
		if err == nil || !strings.Contains(err.Error(), silent+" took it and went silent") {
			t.Errorf("Invoke: %v, want the silent worker named", err)
		}
	})
}

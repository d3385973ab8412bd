package natsengine_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/verify"
	"github.com/haygent/hg/scheduler"
	"github.com/haygent/hg/scheduler/natsengine"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const workorders = "../../fixtures/workorders/"

func seedKey(b byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

var (
	schedulerKey = seedKey(3)
	workerKeys   = []ed25519.PrivateKey{seedKey(11), seedKey(12)}
	rogueKey     = seedKey(9)
)

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

// startServer runs a JetStream server on loopback, on a free port, for the
// test's duration.
func startServer(t *testing.T) string {
	t.Helper()
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s.ClientURL()
}

func connect(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name(t.Name()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// startWorker runs Serve on its own connection until the test ends.
func startWorker(t *testing.T, url string, o natsengine.WorkerOptions) {
	t.Helper()
	nc := connect(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	name := ledger.FormatPublicKey(pub(o.Key))[:16]
	o.Log = func(format string, args ...any) { t.Logf(name+": "+format, args...) }
	go func() { done <- natsengine.Serve(ctx, nc, o) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("Serve did not return")
		}
	})
}

func newEngine(t *testing.T, url string, o natsengine.Options) *natsengine.Engine {
	t.Helper()
	o.Log = t.Logf
	e, err := natsengine.New(connect(t, url), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func runPipeline(t *testing.T, st cas.Store, e scheduler.Engine, trusted []ed25519.PublicKey) (*scheduler.Scheduler, *scheduler.Record) {
	t.Helper()
	plan, err := scheduler.Load(workorders + "pipeline.json")
	if err != nil {
		t.Fatal(err)
	}
	s := scheduler.New(scheduler.Options{Engine: e, Trusted: trusted, Store: scheduler.Shared{Store: st}, Key: schedulerKey, Jobs: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	id, err := s.Start(ctx, plan, "")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.Execute(ctx, plan, id)
	if err != nil {
		t.Fatal(err)
	}
	return s, rec
}

// The pipeline runs on two workers, each with its own key, and every
// receipt is accepted because the scheduler trusts both keys. With tiny
// inline limits, invocations and outcomes travel through the Object
// Store, which is empty again afterwards.
func TestPipelineOnWorkers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int
	}{{"inline", 0}, {"object-store", 1024}} {
		t.Run(tc.name, func(t *testing.T) {
			url := startServer(t)
			for _, k := range workerKeys {
				startWorker(t, url, natsengine.WorkerOptions{Key: k, Jobs: 2, InlineLimit: tc.limit})
			}
			e := newEngine(t, url, natsengine.Options{Timeout: 30 * time.Second, InlineLimit: tc.limit})
			st := memstore.New()
			s, rec := runPipeline(t, st, e, []ed25519.PublicKey{pub(workerKeys[0]), pub(workerKeys[1])})
			if rec.Status != scheduler.StatusDone {
				t.Fatalf("status %s: %s", rec.Status, rec.Reason)
			}
			// seed and left share package and input: the second is
			// usually a memo hit, unless both were in flight at once.
			if n := s.Ran(); n != 5 && n != 6 {
				t.Errorf("ran %d invocations, want 5 or 6", n)
			}
			ctx := context.Background()
			bySigner := map[string]int{}
			for _, n := range rec.Nodes {
				if n.State != dag.Done || n.Receipt == nil || n.Acceptance == nil {
					t.Fatalf("node %s: %s %q", n.Name, n.State, n.Reason)
				}
				var acc scheduler.Acceptance
				if err := st.View(ctx, n.Acceptance.Cid, func(d []byte) error { return cas.Unmarshal(d, &acc) }); err != nil {
					t.Fatal(err)
				}
				if acc.Verdict != "accepted" || acc.Receipt.Cid != n.Receipt.Cid {
					t.Errorf("node %s: acceptance %s of %s", n.Name, acc.Verdict, acc.Receipt)
				}
				r, err := ledger.LoadReceipt(ctx, st, n.Receipt.Cid)
				if err != nil {
					t.Fatal(err)
				}
				signer := ed25519.PublicKey(r.Signer)
				if !signer.Equal(pub(workerKeys[0])) && !signer.Equal(pub(workerKeys[1])) {
					t.Errorf("node %s: receipt signed by %s, not by a worker", n.Name, ledger.FormatPublicKey(signer))
				}
				if !n.Memo {
					bySigner[ledger.FormatPublicKey(signer)]++
				}
			}
			t.Logf("invocations by worker: %v", bySigner)
			// Nothing is left in the Object Store.
			js, _ := jetstream.New(connect(t, url))
			obs, err := js.ObjectStore(ctx, "HG_BLOBS")
			if err != nil {
				t.Fatal(err)
			}
			if infos, err := obs.List(ctx); !errors.Is(err, jetstream.ErrNoObjectsFound) {
				t.Errorf("objects left behind: %d (%v)", len(infos), err)
			}
			// ...and it was used only when the limit says so.
			backing, err := js.Stream(ctx, "OBJ_HG_BLOBS")
			if err != nil {
				t.Fatal(err)
			}
			info, err := backing.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if used := info.State.LastSeq > 0; used != (tc.limit > 0) {
				t.Errorf("object store used: %v (%d messages ever), want %v", used, info.State.LastSeq, tc.limit > 0)
			}
		})
	}
}

// Receipts of a worker the scheduler does not trust are rejected.
func TestUntrustedWorkerRejected(t *testing.T) {
	url := startServer(t)
	startWorker(t, url, natsengine.WorkerOptions{Key: rogueKey})
	e := newEngine(t, url, natsengine.Options{Timeout: 30 * time.Second})
	_, rec := runPipeline(t, memstore.New(), e, []ed25519.PublicKey{pub(workerKeys[0])})
	if rec.Status != scheduler.StatusHalted {
		t.Fatalf("status %s, want halted", rec.Status)
	}
	for _, n := range rec.Nodes {
		switch {
		case n.Name == "seed" && (n.State != dag.Failed || !strings.Contains(n.Reason, "trusted signer")):
			t.Errorf("seed: %s %q, want failed for an untrusted signer", n.State, n.Reason)
		case n.Name != "seed" && n.State != dag.Blocked:
			t.Errorf("%s: %s, want blocked", n.Name, n.State)
		}
	}
}

// echoInvocation is an invocation of the echo Haygent.
func echoInvocation(t *testing.T) scheduler.Invocation {
	t.Helper()
	inv := fixtureInvocation(t, "../../fixtures/haygents/echo", map[string]any{"value": "hello", "trail": []any{"seed"}})
	inv.Node = "seed"
	return inv
}

// tamper flips a byte in the middle of the largest package block's data
// inside an encoded request.
func tamper(t *testing.T, data []byte, inv scheduler.Invocation) []byte {
	t.Helper()
	var big cas.Block
	for _, b := range inv.PackageBlocks {
		if len(b.Data()) > len(big.Data()) {
			big = b
		}
	}
	i := bytes.Index(data, big.Data())
	if i < 0 || len(big.Data()) < 16 {
		t.Fatal("block data not found in the message")
	}
	bad := bytes.Clone(data)
	bad[i+len(big.Data())/2] ^= 0x20
	return bad
}

// A message whose package block does not match its CID is refused by the
// decoder, and a worker answers it with an error instead of running it.
func TestTamperedInvocationRefused(t *testing.T) {
	inv := echoInvocation(t)
	id := strings.Repeat("ab", 16)
	engineID := strings.Repeat("cd", 16)
	req := &natsengine.Request{ID: id, Reply: "hg.result." + engineID + "." + id, Deadline: time.Now().Add(time.Minute), Invocation: inv, Inline: true}
	data, err := natsengine.EncodeRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := natsengine.DecodeRequest(data)
	if err != nil {
		t.Fatalf("untouched message: %v", err)
	}
	if got.ID != id || got.Invocation.Package != inv.Package || len(got.Invocation.PackageBlocks) != len(inv.PackageBlocks) || got.Invocation.Input["value"] != "hello" {
		t.Fatalf("round trip: %+v", got)
	}
	bad := tamper(t, data, inv)
	got, err = natsengine.DecodeRequest(bad)
	if !errors.Is(err, natsengine.ErrRefused) || !errors.Is(err, cas.ErrCorrupt) {
		t.Fatalf("tampered message: %v, want refused as corrupt", err)
	}
	if got == nil || got.Reply != req.Reply {
		t.Fatalf("a refused message that decoded should still name its reply subject: %+v", got)
	}

	// Through a worker: the engine side is played by hand.
	url := startServer(t)
	startWorker(t, url, natsengine.WorkerOptions{Key: workerKeys[0]})
	e := newEngine(t, url, natsengine.Options{}) // makes the streams
	_ = e
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nc := connect(t, url)
	js, _ := jetstream.New(nc)
	cons, err := js.CreateConsumer(ctx, "HG_RESULTS", jetstream.ConsumerConfig{FilterSubject: req.Reply, AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	// A worker that takes an invocation says so with a heartbeat.
	beats, err := nc.SubscribeSync("hg.beat." + engineID + "." + id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "hg.work."+id, bad); err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			t.Fatalf("no answer from the worker: %v", err)
		}
		_ = msg.Ack()
		n, err := cas.DecodeNode(msg.Data())
		if err != nil {
			t.Fatal(err)
		}
		m := n.(map[string]any)
		if m["state"] != "error" || !strings.Contains(m["error"].(string), "refused") {
			t.Fatalf("answer %v, want a refusal", m)
		}
		break
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := beats.Pending(); n > 0 {
		t.Fatalf("the worker took a tampered invocation (%d heartbeats)", n)
	}
	// Terminated, not left for redelivery.
	stream, err := js.Stream(ctx, "HG_WORK")
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the refused message is still queued")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Cancelling ctx stops the wait at once and takes the invocation off the
// queue; with no worker at all, the timeout says nobody picked it up.
func TestCancelAndTimeout(t *testing.T) {
	url := startServer(t)
	inv := echoInvocation(t)
	e := newEngine(t, url, natsengine.Options{Timeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err := e.Invoke(ctx, inv)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Invoke after cancel: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Invoke returned %v after the cancel", d)
	}
	js, _ := jetstream.New(connect(t, url))
	stream, err := js.Stream(context.Background(), "HG_WORK")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := stream.Info(context.Background()); err != nil || info.State.Msgs != 0 {
		t.Errorf("queue after cancel: %+v %v, want empty", info.State, err)
	}

	short := newEngine(t, url, natsengine.Options{Timeout: 300 * time.Millisecond})
	_, err = short.Invoke(context.Background(), inv)
	if err == nil || !strings.Contains(err.Error(), "not picked up by any worker") {
		t.Fatalf("Invoke with no worker: %v", err)
	}
}

// Workers run one invocation each at a time and the engine is safe for
// concurrent use: many invocations at once all come back.
func TestConcurrentInvocations(t *testing.T) {
	url := startServer(t)
	for _, k := range workerKeys {
		startWorker(t, url, natsengine.WorkerOptions{Key: k, Jobs: 2})
	}
	e := newEngine(t, url, natsengine.Options{Timeout: 30 * time.Second})
	inv := echoInvocation(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			inv := inv
			inv.Node = "n" + string(rune('a'+i))
			out, err := e.Invoke(context.Background(), inv)
			if err == nil {
				st := memstore.New()
				if err = st.Put(context.Background(), out.Blocks...); err == nil {
					var v *verify.Verification
					v, err = verify.VerifyReceipt(context.Background(), st, out.Receipt, []ed25519.PublicKey{pub(workerKeys[0]), pub(workerKeys[1])})
					if err == nil && (!v.OK() || v.Status != ledger.StatusPass) {
						err = errors.New("receipt not accepted: " + v.FirstFailure().Detail)
					}
				}
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// A worker that takes an invocation and dies without answering leaves it
// to the consumer's redelivery; once MaxDeliver is spent, the engine fails
// the invocation at once instead of waiting for its timeout.
func TestMaxDeliverFailsInvocation(t *testing.T) {
	url := startServer(t)
	e := newEngine(t, url, natsengine.Options{Timeout: 30 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	js, _ := jetstream.New(connect(t, url))
	// The workers' consumer, as Serve makes it, but with a short ack
	// wait; this "worker" takes the message and never acks it.
	cons, err := js.CreateOrUpdateConsumer(ctx, "HG_WORK", jetstream.ConsumerConfig{
		Durable: "hg-workers", FilterSubject: "hg.work.*", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 300 * time.Millisecond, MaxDeliver: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ctx.Err() == nil {
			_, _ = cons.Next(jetstream.FetchContext(ctx))
		}
	}()
	start := time.Now()
	_, err = e.Invoke(ctx, echoInvocation(t))
	if err == nil || !strings.Contains(err.Error(), "MaxDeliver") {
		t.Fatalf("Invoke: %v, want a MaxDeliver failure", err)
	}
	t.Logf("failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
	stream, err := js.Stream(ctx, "HG_WORK")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Errorf("queue after the failure: %+v %v, want empty", info.State, err)
	}
}

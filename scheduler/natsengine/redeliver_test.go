package natsengine_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/scheduler"
	"github.com/haygent/hg/scheduler/natsengine"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// A worker whose acks never reach the server (its user may not publish
// on $JS.ACK.>: every ack lost, as when it dies right after publishing
// an outcome or a failover drops the ack) still answers what it takes.
// Its invocations' receipts are accepted, and none of them is handed to
// a worker again when the ack wait runs out: the engine took each off
// the queue once it had the outcome. (Its acks are plain ones, which it
// does not wait on, so it goes on taking invocations after the first:
// every one of them has its ack lost.)
func TestAnsweredInvocationNotRunAgain(t *testing.T) {
	const ackWait = 500 * time.Millisecond
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		Users: []*server.User{
			{Username: "hg", Password: "hg"},
			{Username: "lossy", Password: "hg", Permissions: &server.Permissions{
				Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.ACK.>"}}}},
		},
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
	as := func(user string, opts ...nats.Option) *nats.Conn {
		nc, err := nats.Connect(s.ClientURL(), append(opts, nats.UserInfo(user, "hg"), nats.Name(user))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	tr := &runTrace{t: t, t0: time.Now(), node: map[string]string{}}
	serve := func(i int, nc *nats.Conn) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		o := natsengine.WorkerOptions{Key: workerKeys[i], AckWait: ackWait, Dir: t.TempDir(), Events: tr.workerEvents(i)}
		go func() { done <- natsengine.Serve(ctx, nc, o) }()
		t.Cleanup(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("worker %d: Serve: %v", i, err)
				}
			case <-time.After(20 * time.Second):
				t.Errorf("worker %d: Serve did not return", i)
			}
		})
	}
	// The lossy worker alone takes the first invocation; the other
	// starts once that is accepted.
	serve(0, as("lossy", nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})))
	e := newEngineOn(t, as("hg"))
	other := as("hg")
	var once sync.Once
	events := func(ev scheduler.Event) {
		tr.event(ev)
		if tr.acceptedSoFar() > 0 {
			once.Do(func() { serve(1, other) })
		}
	}

	const nodes = 12
	plan, err := scheduler.Load(writeFanout(t, nodes))
	if err != nil {
		t.Fatal(err)
	}
	sched := scheduler.New(scheduler.Options{Engine: e, Trusted: []ed25519.PublicKey{pub(workerKeys[0]), pub(workerKeys[1])},
		Store: scheduler.Shared{Store: memstore.New()}, Key: schedulerKey, Jobs: 2, NoCache: true, Events: events})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := sched.Start(ctx, plan, "")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := sched.Execute(ctx, plan, id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != scheduler.StatusDone {
		t.Fatalf("status %s: %s", rec.Status, rec.Reason)
	}
	// The lossy worker's message would come back after the ack wait.
	time.Sleep(4 * ackWait)

	tr.mu.Lock()
	defer tr.mu.Unlock()
	accepted, took := map[string]bool{}, map[int]int{}
	for _, st := range tr.steps {
		switch st.kind {
		case "accepted":
			accepted[st.node] = true
		case "took":
			took[st.worker]++
			if accepted[st.node] {
				t.Errorf("worker %d took %s after its receipt was accepted", st.worker, st.node)
			}
		}
	}
	if took[0] < 1 || took[0]+took[1] != nodes || len(accepted) != nodes {
		t.Errorf("the lossy worker took %d invocations, the other %d, want at least 1 and %d in all (none twice); %d of %d nodes accepted", took[0], took[1], nodes, len(accepted), nodes)
	}
	t.Logf("invocations taken by worker: %v", took)
}

// newEngineOn makes an engine on nc for the test's duration.
func newEngineOn(t *testing.T, nc *nats.Conn) *natsengine.Engine {
	t.Helper()
	e, err := natsengine.New(nc, natsengine.Options{Timeout: 20 * time.Second, Log: t.Logf})
	if err != nil {
		t.Fatal(fmt.Errorf("engine: %w", err))
	}
	t.Cleanup(func() { e.Close() })
	return e
}

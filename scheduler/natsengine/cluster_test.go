package natsengine_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/scheduler"
	"github.com/haygent/hg/scheduler/natsengine"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// cluster is a JetStream cluster of embedded servers on loopback. Its
// ports are fixed when it is made, so that a server shut down starts
// again as itself, on its own store.
type cluster struct {
	t       *testing.T
	clients []int // client ports
	routes  []int // cluster ports
	dirs    []string

	mu  sync.Mutex
	srv []*server.Server // nil while down
}

// freePorts returns n ports that were free on loopback a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

func startCluster(t *testing.T, n int) *cluster {
	t.Helper()
	ports := freePorts(t, 2*n)
	c := &cluster{t: t, clients: ports[:n], routes: ports[n:], srv: make([]*server.Server, n)}
	for range n {
		c.dirs = append(c.dirs, t.TempDir())
	}
	t.Cleanup(func() {
		for i := range c.srv {
			c.stop(i)
		}
	})
	for i := range n {
		c.start(i)
	}
	return c
}

func (c *cluster) name(i int) string { return fmt.Sprintf("s%d", i) }

// index returns the index of the server called name, or -1.
func (c *cluster) index(name string) int {
	for i := range c.clients {
		if c.name(i) == name {
			return i
		}
	}
	return -1
}

// start starts server i, or starts it again on its store.
func (c *cluster) start(i int) {
	c.t.Helper()
	var routes []string
	for j, p := range c.routes {
		if j != i {
			routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
		}
	}
	s, err := server.NewServer(&server.Options{
		ServerName: c.name(i), Host: "127.0.0.1", Port: c.clients[i],
		JetStream: true, StoreDir: c.dirs[i], NoLog: true, NoSigs: true,
		Cluster: server.ClusterOpts{Name: "hg-test", Host: "127.0.0.1", Port: c.routes[i]},
		Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
	})
	if err != nil {
		c.t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		c.t.Fatalf("server %s not ready", c.name(i))
	}
	c.mu.Lock()
	c.srv[i] = s
	c.mu.Unlock()
}

// stop shuts server i down, if it is up.
func (c *cluster) stop(i int) {
	c.mu.Lock()
	s := c.srv[i]
	c.srv[i] = nil
	c.mu.Unlock()
	if s != nil {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// url lists every server, for clients that move to another when theirs
// goes.
func (c *cluster) url() string {
	var urls []string
	for _, p := range c.clients {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	return strings.Join(urls, ",")
}

// connect connects to the cluster; the connection keeps reconnecting,
// to whichever server is up, until the test ends.
func (c *cluster) connect(name string) *nats.Conn {
	c.t.Helper()
	nc, err := nats.Connect(c.url(), nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(nc.Close)
	return nc
}

// waitHealthy waits until every stream and consumer named has a leader
// and all its replicas are up and current, and returns the leader of
// each stream, by name.
func waitHealthy(ctx context.Context, js jetstream.JetStream, consumers map[string][]string) (map[string]string, error) {
	healthy := func(ci *jetstream.ClusterInfo, want int) bool {
		if ci == nil || ci.Leader == "" || len(ci.Replicas) != want-1 {
			return false
		}
		for _, r := range ci.Replicas {
			if !r.Current || r.Offline {
				return false
			}
		}
		return true
	}
	for {
		leaders := map[string]string{}
		ok := true
		var last error
		for stream, cons := range consumers {
			s, err := js.Stream(ctx, stream)
			if err != nil {
				ok, last = false, err
				break
			}
			info := s.CachedInfo()
			if !healthy(info.Cluster, info.Config.Replicas) {
				ok = false
				break
			}
			leaders[stream] = info.Cluster.Leader
			for _, name := range cons {
				cn, err := js.Consumer(ctx, stream, name)
				if err != nil {
					ok, last = false, err
					break
				}
				if !healthy(cn.CachedInfo().Cluster, info.Config.Replicas) {
					ok = false
					break
				}
			}
		}
		if ok {
			return leaders, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the cluster is not healthy: %w (last error: %v)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// gate holds new invocations back while it is shut, so that the
// cluster can heal between faults without the run ending meanwhile;
// invocations under way go on.
type gate struct {
	scheduler.Engine
	mu   sync.Mutex
	shut chan struct{} // nil while open
}

func (g *gate) close() {
	g.mu.Lock()
	g.shut = make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) open() {
	g.mu.Lock()
	close(g.shut)
	g.shut = nil
	g.mu.Unlock()
}

func (g *gate) Invoke(ctx context.Context, inv scheduler.Invocation) (scheduler.Outcome, error) {
	g.mu.Lock()
	shut := g.shut
	g.mu.Unlock()
	if shut != nil {
		select {
		case <-shut:
		case <-ctx.Done():
			return scheduler.Outcome{}, ctx.Err()
		}
	}
	return g.Engine.Invoke(ctx, inv)
}

// A Work Order of 240 builtin-only nodes runs on two workers over a
// three-server JetStream cluster whose streams are kept by all three
// servers (Names.Replicas 3), and one worker dies holding an invocation
// (its connection closed under it). In leaders-and-worker, the leader of
// the work stream is also shut down twice during the run (each time
// started again once the run has moved on without it, so that the
// cluster keeps its quorum). The run completes; every node ran for one
// attempt of the scheduler and its receipt was accepted once; no worker
// took a node again once its receipt was accepted; and the stored run
// verifies.
//
// leaders-and-worker takes 10 to 40 s on two cores: each shutdown of a
// leader loses a reply or two, which the worker publishes again a few
// seconds later (publishReply).
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-server cluster with servers and a worker killed: not in -short mode")
	}
	t.Run("worker", func(t *testing.T) { clusterFailover(t, false) })
	t.Run("leaders-and-worker", func(t *testing.T) { clusterFailover(t, true) })
}

func clusterFailover(t *testing.T, killLeaders bool) {
	const nodes = 240
	tr := &runTrace{t: t, t0: time.Now(), node: map[string]string{}}
	plan, err := scheduler.Load(writeFanout(t, nodes))
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, 3)
	// Generous: three servers electing leaders under -race on a loaded
	// two-core machine; the run itself takes 10 to 40 seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	admin := c.connect("admin")
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	names := natsengine.Names{Replicas: 3}

	// The engine makes the streams once the cluster has elected its
	// JetStream leader (until then, requests go unanswered).
	for {
		actx, acancel := context.WithTimeout(ctx, time.Second)
		_, err := js.AccountInfo(actx)
		acancel()
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no JetStream on the cluster: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	tr.logf("JetStream is up")
	var eng *natsengine.Engine
	enc := c.connect("engine")
	for {
		eng, err = natsengine.New(enc, natsengine.Options{Names: names, Timeout: time.Minute, Log: tr.logf})
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no engine on the cluster: %v", err)
		case <-time.After(250 * time.Millisecond):
		}
	}
	t.Cleanup(func() { eng.Close() })

	// Workers: a short ack wait, so that what a dead worker held is
	// handed out again soon (yet longer than a failover, which the
	// engine's removal of answered invocations must outlast), and room
	// for the redeliveries that failed publications during a failover
	// cause.
	type running struct {
		nc     *nats.Conn
		cancel context.CancelFunc
		done   chan error
	}
	workers := make([]running, len(workerKeys))
	for i, k := range workerKeys {
		wctx, wcancel := context.WithCancel(context.Background())
		w := running{nc: c.connect(fmt.Sprintf("worker %d", i)), cancel: wcancel, done: make(chan error, 1)}
		workers[i] = w
		o := natsengine.WorkerOptions{Names: names, Key: k, Jobs: 2, AckWait: 5 * time.Second, MaxDeliver: 20,
			Dir: t.TempDir(), Events: tr.workerEvents(i)}
		go func() { w.done <- natsengine.Serve(wctx, w.nc, o) }()
	}
	t.Cleanup(func() {
		for i, w := range workers {
			w.cancel()
			select {
			case err := <-w.done:
				if err != nil {
					t.Errorf("worker %d: Serve: %v", i, err)
				}
			case <-time.After(20 * time.Second):
				t.Errorf("worker %d: Serve did not return", i)
			}
		}
	})
	where := func() string {
		return fmt.Sprintf("engine on %s, worker 0 on %s, worker 1 on %s",
			enc.ConnectedServerName(), workers[0].nc.ConnectedServerName(), workers[1].nc.ConnectedServerName())
	}
	consumers := map[string][]string{"HG_WORK": {"hg-workers"}, "HG_RESULTS": {"hg-engine-" + eng.ID()}}
	// Serve makes the workers' consumer: wait for it, then for the
	// cluster to settle.
	for {
		if _, err := js.Consumer(ctx, "HG_WORK", "hg-workers"); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the workers made no consumer")
		case <-time.After(50 * time.Millisecond):
		}
	}
	if leaders, err := waitHealthy(ctx, js, consumers); err != nil {
		t.Fatal(err)
	} else {
		tr.logf("the cluster is up; leaders %v; %s", leaders, where())
	}

	// The faults, each once the run has accepted so many nodes.
	g := &gate{Engine: eng}
	var killed struct {
		sync.Mutex
		armed  bool
		worker int
		done   chan struct{}
	}
	killed.done = make(chan struct{})
	tr.onTake = func(i int) {
		killed.Lock()
		defer killed.Unlock()
		if !killed.armed {
			return
		}
		killed.armed, killed.worker = false, i
		// Abruptly: the connection goes under the invocation just
		// taken; nothing is handed back, the ack wait runs out.
		workers[i].nc.Close()
		workers[i].cancel()
		close(killed.done)
	}
	faults := make(chan error, 1)
	go func() {
		faults <- func() error {
			waitFor := func(n int) error {
				for tr.acceptedSoFar() < n {
					select {
					case <-ctx.Done():
						return fmt.Errorf("waiting for %d nodes accepted (%d are): %w", n, tr.acceptedSoFar(), ctx.Err())
					case <-time.After(5 * time.Millisecond):
					}
				}
				return nil
			}
			// The leader of the work stream goes with invocations in
			// flight; once the run has moved on without it, new
			// invocations are held back while it starts again and
			// catches up, so that the next fault finds a whole cluster
			// and a run still under way.
			killLeader := func(at, moveOn int) error {
				if err := waitFor(at); err != nil {
					return err
				}
				stream, err := js.Stream(ctx, "HG_WORK")
				if err != nil {
					return err
				}
				i := c.index(stream.CachedInfo().Cluster.Leader)
				start := time.Now()
				c.stop(i)
				tr.logf("%d nodes accepted: shut down %s, the leader of HG_WORK (%s)", tr.acceptedSoFar(), c.name(i), where())
				if err := waitFor(moveOn); err != nil {
					return err
				}
				tr.logf("%d nodes accepted %v after %s went; holding new invocations back while it starts again", tr.acceptedSoFar(), time.Since(start).Round(time.Millisecond), c.name(i))
				g.close()
				defer g.open()
				c.start(i)
				all, err := waitHealthy(ctx, js, consumers)
				if err != nil {
					return err
				}
				tr.logf("healthy again %v after the shutdown; leaders %v", time.Since(start).Round(time.Millisecond), all)
				return nil
			}
			if killLeaders {
				if err := killLeader(30, 60); err != nil {
					return err
				}
			}
			if err := waitFor(90); err != nil {
				return err
			}
			killed.Lock()
			killed.armed = true
			killed.Unlock()
			select {
			case <-killed.done:
				tr.logf("%d nodes accepted: worker %d died holding an invocation", tr.acceptedSoFar(), killed.worker)
			case <-ctx.Done():
				return errors.New("no worker took anything more to die with")
			}
			if !killLeaders {
				return nil
			}
			at := tr.acceptedSoFar() + 20
			return killLeader(at, at+30)
		}()
	}()

	trusted := []ed25519.PublicKey{pub(workerKeys[0]), pub(workerKeys[1])}
	st := memstore.New()
	s := scheduler.New(scheduler.Options{Engine: g, Trusted: trusted, Store: scheduler.Shared{Store: st}, Key: schedulerKey,
		Jobs: 6, NoCache: true, Events: tr.event})
	start := time.Now()
	id, err := s.Start(ctx, plan, "")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.Execute(ctx, plan, id)
	if err != nil {
		t.Fatal(err)
	}
	tr.logf("run %s: %s in %v", rec.Run, rec.Status, time.Since(start).Round(time.Millisecond))
	if err := <-faults; err != nil {
		t.Errorf("faults: %v", err)
	}
	if rec.Status != scheduler.StatusDone {
		diagnose(t, js)
		for _, n := range rec.Nodes {
			if n.State != dag.Done {
				t.Logf("node %s: %s %q", n.Name, n.State, n.Reason)
			}
		}
		t.Fatalf("status %s: %s", rec.Status, rec.Reason)
	}

	// The record: every node done in one attempt, its receipt signed by
	// a worker and accepted.
	if s.Ran() != nodes {
		t.Errorf("the scheduler invoked %d times for %d nodes", s.Ran(), nodes)
	}
	for _, n := range rec.Nodes {
		if n.State != dag.Done || n.Receipt == nil || n.Acceptance == nil || n.Memo || n.Attempts != 1 || len(n.Earlier) != 0 {
			t.Errorf("node %s: %s, %d attempts, %d earlier receipts, memo %v: %q", n.Name, n.State, n.Attempts, len(n.Earlier), n.Memo, n.Reason)
			continue
		}
		var acc scheduler.Acceptance
		if err := st.View(ctx, n.Acceptance.Cid, func(d []byte) error { return cas.Unmarshal(d, &acc) }); err != nil {
			t.Fatal(err)
		}
		if acc.Verdict != scheduler.Accepted || acc.Receipt.Cid != n.Receipt.Cid {
			t.Errorf("node %s: acceptance %s of %s", n.Name, acc.Verdict, acc.Receipt)
		}
		r, err := ledger.LoadReceipt(ctx, st, n.Receipt.Cid)
		if err != nil {
			t.Fatal(err)
		}
		if signer := ed25519.PublicKey(r.Signer); !slices.ContainsFunc(trusted, func(k ed25519.PublicKey) bool { return k.Equal(signer) }) {
			t.Errorf("node %s: receipt signed by %s, not by a worker", n.Name, ledger.FormatPublicKey(signer))
		}
	}

	// The trace: each node accepted once, and taken by no worker after.
	tr.mu.Lock()
	steps := slices.Clone(tr.steps)
	tr.mu.Unlock()
	accepted := map[string]int{}
	took := map[string]int{}
	var again []string
	for _, st := range steps {
		switch st.kind {
		case "accepted":
			accepted[st.node]++
		case "took":
			took[st.node]++
			if accepted[st.node] > 0 {
				again = append(again, fmt.Sprintf("%s (worker %d)", st.node, st.worker))
			}
		}
	}
	if len(again) > 0 {
		t.Errorf("taken again after its receipt was accepted: %v", again)
	}
	runs := map[int]int{} // times taken -> nodes
	for _, n := range rec.Nodes {
		if accepted[n.Name] != 1 {
			t.Errorf("node %s: accepted %d times", n.Name, accepted[n.Name])
		}
		if took[n.Name] == 0 {
			t.Errorf("node %s: no worker said it took it", n.Name)
		}
		runs[took[n.Name]]++
	}
	t.Logf("nodes by times a worker took them: %v", runs)

	// The stored run verifies on its own.
	root, err := st.GetRef(ctx, scheduler.RefNamespace, rec.Run)
	if err != nil {
		t.Fatal(err)
	}
	v, err := scheduler.VerifyRun(ctx, st, root, append(trusted, pub(schedulerKey)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !v.OK() {
		node, ch := v.FirstFailure()
		t.Fatalf("the run does not verify: node %s: %+v", node, ch)
	}
}

// diagnose logs the state of the streams and consumers.
func diagnose(t *testing.T, js jetstream.JetStream) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, name := range []string{"HG_WORK", "HG_RESULTS"} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Logf("stream %s: %v", name, err)
			continue
		}
		info := s.CachedInfo()
		t.Logf("stream %s: leader %s, %d messages (seq %d..%d)", name, info.Cluster.Leader, info.State.Msgs, info.State.FirstSeq, info.State.LastSeq)
		for cons := range s.ListConsumers(ctx).Info() {
			t.Logf("  consumer %s: leader %s, pending %d, ack pending %d, redelivered %d, waiting pulls %d, delivered %d, acked %d",
				cons.Name, cons.Cluster.Leader, cons.NumPending, cons.NumAckPending, cons.NumRedelivered, cons.NumWaiting,
				cons.Delivered.Stream, cons.AckFloor.Stream)
		}
	}
}

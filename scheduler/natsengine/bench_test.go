package natsengine_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/internal/gcpolicy"
	"github.com/haygent/hg/scheduler"
	"github.com/haygent/hg/scheduler/natsengine"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// benchServer runs a JetStream server on loopback for the benchmark.
func benchServer(b *testing.B) *server.Server {
	b.Helper()
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: b.TempDir(), NoLog: true, NoSigs: true,
	})
	if err != nil {
		b.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		b.Fatal("nats server not ready")
	}
	b.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// serverMsgs is how many messages the server has received and sent, of
// every kind (publications, acks, pulls, deliveries, API requests and
// their replies, heartbeats).
func serverMsgs(b *testing.B, s *server.Server) (msgs, bytes int64) {
	v, err := s.Varz(nil)
	if err != nil {
		b.Fatal(err)
	}
	return v.InMsgs + v.OutMsgs, v.InBytes + v.OutBytes
}

// BenchmarkNATSThroughput runs the same Work Order of builtin-only nodes
// (a fan-out, 2,000 nodes; HG_BENCH_NATS_SIZE=N for N) through the NATS
// engine, with two workers in this process on one JetStream server on
// loopback, and through the local engine, five runs of each in turn
// after one uncounted run of each, and reports the nodes a second of
// each, their ratio, the CPU time a node of each (the workers' and the
// server's included: they share the process and its cores), and the
// messages and bytes the server received and sent a node in the NATS
// runs. Both runs are the same scheduler with the same options (receipts
// verified, accepted and stored in memory, no memo cache, jobs 64); only
// the engine differs. Each worker has 32 jobs, so that the scheduler's
// jobs fill both workers' slots: invocations asked for while one is
// published travel together, and so do outcomes (HG_BENCH_NATS_JOBS and
// HG_BENCH_NATS_WORKER_JOBS change the jobs; at 8 and 4 batches are
// small, see docs/performance.md). Target: NATS at least half the local
// throughput for builtin-only nodes (measured, not asserted).
func BenchmarkNATSThroughput(b *testing.B) {
	defer gcpolicy.Apply()() // as hg run sets it
	n := 2000
	if s := os.Getenv("HG_BENCH_NATS_SIZE"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	jobs, workerJobs := 64, 32 // the scheduler's (both engines), each worker's
	const rounds = 5           // runs of each engine, alternating, per b.N
	if s := os.Getenv("HG_BENCH_NATS_JOBS"); s != "" {
		jobs, _ = strconv.Atoi(s)
	}
	if s := os.Getenv("HG_BENCH_NATS_WORKER_JOBS"); s != "" {
		workerJobs, _ = strconv.Atoi(s)
	}
	// HG_BENCH_NATS_ONLY=1 runs only the NATS engine, for a profile of it
	// alone: no ratio then.
	natsOnly := os.Getenv("HG_BENCH_NATS_ONLY") != ""
	plan, err := scheduler.Load(writeFanout(b, n))
	if err != nil {
		b.Fatal(err)
	}
	srv := benchServer(b)
	url := srv.ClientURL()
	conn := func() *nats.Conn {
		nc, err := nats.Connect(url)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nc.Close)
		return nc
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, len(workerKeys))
	for _, k := range workerKeys {
		go func() {
			served <- natsengine.Serve(ctx, conn(), natsengine.WorkerOptions{Key: k, Jobs: workerJobs, Dir: b.TempDir()})
		}()
	}
	defer func() {
		cancel()
		for range workerKeys {
			if err := <-served; err != nil {
				b.Errorf("Serve: %v", err)
			}
		}
	}()
	eng, err := natsengine.New(conn(), natsengine.Options{Timeout: 5 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	trusted := []ed25519.PublicKey{pub(workerKeys[0]), pub(workerKeys[1])}

	once := func(e scheduler.Engine) (wall, cpu time.Duration) {
		s := scheduler.New(scheduler.Options{
			Store: scheduler.Shared{Store: memstore.New()}, Key: schedulerKey, Trusted: trusted,
			Engine: e, Jobs: jobs, NoCache: true,
		})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cpu0 := cpuTime(b)
		start := time.Now()
		id, err := s.Start(ctx, plan, "")
		if err != nil {
			b.Fatal(err)
		}
		rec, err := s.Execute(ctx, plan, id)
		wall, cpu = time.Since(start), cpuTime(b)-cpu0
		if err != nil {
			b.Fatal(err)
		}
		if rec.Status != scheduler.StatusDone || s.Ran() != n {
			b.Fatalf("status %s (%s), ran %d of %d nodes", rec.Status, rec.Reason, s.Ran(), n)
		}
		return wall, cpu
	}
	// One uncounted run of each first: the workers unpack the package,
	// the connections and the process's memory warm up.
	if !natsOnly {
		once(nil)
	}
	once(eng)
	b.ResetTimer()
	var local, remote, localCPU, remoteCPU time.Duration
	var msgs, bytes int64 // the server's, in the NATS runs
	for range b.N * rounds {
		if !natsOnly {
			w, c := once(nil)
			local, localCPU = local+w, localCPU+c
		}
		m0, b0 := serverMsgs(b, srv)
		w, c := once(eng)
		remote, remoteCPU = remote+w, remoteCPU+c
		m1, b1 := serverMsgs(b, srv)
		msgs, bytes = msgs+m1-m0, bytes+b1-b0
	}
	b.StopTimer()
	nodes := float64(b.N * rounds * n)
	if natsOnly {
		b.ReportMetric(nodes/remote.Seconds(), "nats-nodes/s")
		b.ReportMetric(float64(remoteCPU.Microseconds())/nodes, "nats-cpu-µs/node")
		b.ReportMetric(float64(msgs)/nodes, "server-msgs/node")
		b.ReportMetric(float64(bytes)/nodes, "server-bytes/node")
		return
	}
	localRate, natsRate := nodes/local.Seconds(), nodes/remote.Seconds()
	b.ReportMetric(localRate, "local-nodes/s")
	b.ReportMetric(natsRate, "nats-nodes/s")
	b.ReportMetric(natsRate/localRate, "nats/local")
	b.ReportMetric(float64(localCPU.Microseconds())/nodes, "local-cpu-µs/node")
	b.ReportMetric(float64(remoteCPU.Microseconds())/nodes, "nats-cpu-µs/node")
	b.ReportMetric(float64(msgs)/nodes, "server-msgs/node")
	b.ReportMetric(float64(bytes)/nodes, "server-bytes/node")
	verdict := "MISSED"
	if natsRate >= localRate/2 {
		verdict = "met"
	}
	fmt.Printf("\nNATS engine throughput, %d builtin-only nodes (fan-out), scheduler jobs %d, 2 workers x %d jobs, one server on loopback (%d CPUs):\n"+
		"  local  %8.0f nodes/s  %6.0f CPU-µs/node\n  nats   %8.0f nodes/s  %6.0f CPU-µs/node (workers and server included), %.1f server messages a node (in and out)\n"+
		"  nats/local %.2f   target >= 0.5   %s (measured, not asserted)\n",
		n, jobs, workerJobs, runtime.NumCPU(), localRate, float64(localCPU.Microseconds())/nodes,
		natsRate, float64(remoteCPU.Microseconds())/nodes, float64(msgs)/nodes, natsRate/localRate, verdict)
}

// cpuTime is the CPU time this process has used, user and system: the
// scheduler's, the workers' and the server's, all in this process.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

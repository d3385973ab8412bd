package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// natsServer is an embedded NATS server a test can stop and start again
// on the same port with the same store: an outage.
type natsServer struct {
	t    *testing.T
	dir  string
	port int
	js   bool
	s    *server.Server
}

func startNATS(t *testing.T, js bool) *natsServer {
	t.Helper()
	n := &natsServer{t: t, dir: t.TempDir(), port: -1, js: js}
	n.start()
	n.port = n.s.Addr().(*net.TCPAddr).Port
	t.Cleanup(n.stop)
	return n
}

func (n *natsServer) start() {
	n.t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: n.port, JetStream: n.js, StoreDir: n.dir, NoLog: true, NoSigs: true})
	if err != nil {
		n.t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		n.t.Fatal("nats server not ready")
	}
	n.s = s
}

func (n *natsServer) stop() {
	if n.s != nil {
		n.s.Shutdown()
		n.s.WaitForShutdown()
		n.s = nil
	}
}

func (n *natsServer) url() string { return "nats://127.0.0.1:" + strconv.Itoa(n.port) }

// workerProc is an `hg worker --json` process and the events it logged.
type workerProc struct {
	cmd    *exec.Cmd
	key    string
	mu     sync.Mutex
	events []map[string]any
	lines  chan map[string]any
	stderr bytes.Buffer
}

// startJSONWorker starts `hg worker --json` on store with env added, and
// waits for its first line, which names its key.
func startJSONWorker(t *testing.T, hg, store, url string, env ...string) *workerProc {
	t.Helper()
	w := &workerProc{lines: make(chan map[string]any, 1000)}
	w.cmd = exec.Command(hg, "--store", store, "worker", "--json", "--nats", url)
	w.cmd.Env = append(os.Environ(), env...)
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	w.cmd.Stderr = &w.stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if w.cmd.ProcessState == nil {
			w.cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { w.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				w.cmd.Process.Kill()
			}
		}
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev map[string]any
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				ev = map[string]any{"event": "NOT JSON", "line": sc.Text()}
			}
			w.mu.Lock()
			w.events = append(w.events, ev)
			w.mu.Unlock()
			w.lines <- ev
		}
		close(w.lines)
	}()
	first := w.next(t, "started")
	w.key, _ = first["worker"].(string)
	if !strings.HasPrefix(w.key, "ed25519:") {
		t.Fatalf("worker's first event %v", first)
	}
	return w
}

// next waits for the worker's next event named event.
func (w *workerProc) next(t *testing.T, event string) map[string]any {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case ev, ok := <-w.lines:
			if !ok {
				t.Fatalf("the worker ended before %q; stderr: %s", event, w.stderr.String())
			}
			if ev["event"] == event {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %q from the worker; stderr: %s", event, w.stderr.String())
		}
	}
}

func (w *workerProc) all() []map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]map[string]any(nil), w.events...)
}

func initStores(t *testing.T, hg string, names ...string) []string {
	t.Helper()
	var out []string
	for _, n := range names {
		s := filepath.Join(t.TempDir(), n)
		if b, err := exec.Command(hg, "--store", s, "init").CombinedOutput(); err != nil {
			t.Fatalf("init: %v %s", err, b)
		}
		out = append(out, s)
	}
	return out
}

// A server without JetStream: hg worker and hg run --nats say so, with
// how to start one that has it.
func TestNATSWithoutJetStream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server")
	}
	srv := startNATS(t, false)
	hg := hgBinary(t)
	stores := initStores(t, hg, "store")
	wo, _ := filepath.Abs("../../fixtures/workorders/pipeline.json")
	for _, args := range [][]string{
		{"worker", "--nats", srv.url()},
		{"run", "--nats", srv.url(), wo},
	} {
		out, err := exec.Command(hg, append([]string{"--store", stores[0]}, args...)...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Errorf("hg %s: %v, want exit 1\n%s", args[0], err, out)
		}
		for _, want := range []string{"hg: error: ", "JetStream", "hg: hint: ", "nats-server -js"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("hg %s: no %q in\n%s", args[0], want, out)
			}
		}
	}
}

// `hg key trust` of a worker's key is enough for `hg run --nats` (no
// --trust): the run is done, records the keys it trusted, and `hg verify
// RUN` passes. The worker logs its events as JSON lines with their
// times. A worker killed with SIGKILL leaves its temporary directory,
// which the next worker removes.
func TestWorkerKeyTrustLogsAndLeftovers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server and workers")
	}
	srv := startNATS(t, true)
	hg := hgBinary(t)
	stores := initStores(t, hg, "worker", "scheduler")
	workerStore, schedStore := stores[0], stores[1]
	tmp := t.TempDir()
	w := startJSONWorker(t, hg, workerStore, srv.url(), "TMPDIR="+tmp)
	w.next(t, "connected")
	if out, err := exec.Command(hg, "--store", schedStore, "key", "trust", w.key).CombinedOutput(); err != nil {
		t.Fatalf("key trust: %v %s", err, out)
	}
	wo, _ := filepath.Abs("../../fixtures/workorders/pipeline.json")
	if out, err := exec.Command(hg, "--store", schedStore, "run", "--nats", srv.url(), "--run-id", "run-kt", wo).CombinedOutput(); err != nil {
		t.Fatalf("run: %v\n%s\nworker: %s", err, out, w.stderr.String())
	}
	if out, err := exec.Command(hg, "--store", schedStore, "verify", "run-kt").CombinedOutput(); err != nil {
		t.Errorf("verify: %v\n%s", err, out)
	}
	out, err := exec.Command(hg, "--store", schedStore, "runs", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var runs []struct {
		Run     string   `json:"run"`
		Status  string   `json:"status"`
		Trusted []string `json:"trusted"`
	}
	if err := json.Unmarshal(out, &runs); err != nil || len(runs) != 1 {
		t.Fatalf("runs --json: %v %s", err, out)
	}
	if runs[0].Status != "done" || !contains(runs[0].Trusted, w.key) {
		t.Errorf("run %+v: want done, trusting %s", runs[0], w.key)
	}

	// The worker's log: a line per event, each with its time.
	took := w.next(t, "took")
	done := w.next(t, "done")
	for _, ev := range []map[string]any{took, done} {
		if ev["run"] != "run-kt" || ev["node"] == "" || ev["id"] == "" {
			t.Errorf("event %v: no run, node or id", ev)
		}
	}
	if r, _ := done["receipt"].(string); !strings.HasPrefix(r, "bafy") {
		t.Errorf("done event %v: no receipt", done)
	}
	for _, ev := range w.all() {
		s, _ := ev["time"].(string)
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			t.Errorf("event %v: time %q: %v", ev, s, err)
		}
	}

	// Killed: its directory stays until the next worker starts.
	pid := w.cmd.Process.Pid
	own := func() []string {
		m, _ := filepath.Glob(filepath.Join(tmp, "hg-"+strconv.Itoa(pid)+"-*"))
		return m
	}
	if len(own()) == 0 {
		t.Fatalf("the worker has no directory of its own in %s", tmp)
	}
	w.cmd.Process.Kill()
	w.cmd.Wait()
	if len(own()) == 0 {
		t.Fatalf("a killed worker's directory went by itself")
	}
	w2 := startJSONWorker(t, hg, workerStore, srv.url(), "TMPDIR="+tmp)
	w2.next(t, "connected")
	if left := own(); len(left) > 0 {
		t.Errorf("the killed worker's directory is still there: %v", left)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// The server goes down in the middle of a run for longer than a client
// that gives up would wait (at the test's reconnect wait, many more
// attempts than the default 60), and comes back: the run finishes, and
// hg run says on stderr when it lost and regained the server; the worker
// logs both.
func TestRunNATSOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server, a worker and a run of several seconds")
	}
	srv := startNATS(t, true)
	hg := hgBinary(t)
	stores := initStores(t, hg, "worker", "scheduler")
	fast := "HG_NATS_RECONNECT_WAIT=50ms"
	w := startJSONWorker(t, hg, stores[0], srv.url(), fast)
	w.next(t, "connected")
	wo, _ := filepath.Abs("../../fixtures/workorders/slow-chain.json")
	run := exec.Command(hg, "--store", stores[1], "run", "--nats", srv.url(), "--trust", w.key, "--run-id", "run-outage", wo)
	run.Env = append(os.Environ(), fast)
	var stderr bytes.Buffer
	run.Stderr = &stderr
	run.Stdout = io.Discard
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	finished := make(chan error, 1)
	go func() { finished <- run.Wait() }()
	w.next(t, "done") // the first node
	srv.stop()
	time.Sleep(4 * time.Second)
	srv.start()
	select {
	case err := <-finished:
		if err != nil {
			t.Fatalf("run: %v\n%s", err, stderr.String())
		}
	case <-time.After(3 * time.Minute):
		run.Process.Kill()
		t.Fatalf("the run did not finish after the outage\n%s", stderr.String())
	}
	st, err := status(t, hg, stores[1], "run-outage")
	if err != nil || st.Status != "done" {
		t.Fatalf("run after the outage: %+v %v", st, err)
	}
	for _, want := range []string{"hg: lost the NATS server", "hg: reconnected to the NATS server"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("hg run's stderr has no %q:\n%s", want, stderr.String())
		}
	}
	w.next(t, "reconnected")
	seen := map[string]bool{}
	for _, ev := range w.all() {
		seen[ev["event"].(string)] = true
	}
	if !seen["disconnected"] {
		t.Errorf("the worker logged no disconnection: %v", w.all())
	}
}

// With no worker polling, hg run --nats says so within seconds, naming
// the stream and consumer and how to start a worker, instead of waiting
// silently for its timeout.
func TestRunNATSNoWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server")
	}
	srv := startNATS(t, true)
	hg := hgBinary(t)
	stores := initStores(t, hg, "scheduler")
	wo, _ := filepath.Abs("../../fixtures/workorders/pipeline.json")
	run := exec.Command(hg, "--store", stores[0], "run", "--nats", srv.url(), wo)
	stderr, err := run.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		run.Process.Kill()
		run.Wait()
	}()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("hg run ended without a word about workers")
			}
			if !strings.Contains(l, "no worker") {
				continue
			}
			for _, want := range []string{"hg: ", "HG_WORK", "hg-workers", "hg worker --nats"} {
				if !strings.Contains(l, want) {
					t.Errorf("line %q does not say %q", l, want)
				}
			}
			return
		case <-timeout:
			t.Fatal("hg run said nothing about having no worker")
		}
	}
}

// A worker killed with SIGKILL in the middle of a node: hg run says the
// worker went silent and that the node waits for redelivery, another
// worker gets it once the ack wait (15 s) runs out, and the run is done.
func TestRunNATSKilledWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server, two workers and waits out an ack wait")
	}
	srv := startNATS(t, true)
	hg := hgBinary(t)
	stores := initStores(t, hg, "worker1", "worker2", "scheduler")
	workers := []*workerProc{
		startJSONWorker(t, hg, stores[0], srv.url()),
		startJSONWorker(t, hg, stores[1], srv.url()),
	}
	for _, w := range workers {
		w.next(t, "connected")
	}
	wo, _ := filepath.Abs("../../fixtures/workorders/slow-chain.json")
	run := exec.Command(hg, "--store", stores[2], "run", "--nats", srv.url(), "--trust", workers[0].key, "--trust", workers[1].key, "--run-id", "run-killed", wo)
	var stderr bytes.Buffer
	run.Stderr = &stderr
	run.Stdout = io.Discard
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	finished := make(chan error, 1)
	go func() { finished <- run.Wait() }()
	// Kill whichever worker takes the second node first.
	var killed *workerProc
	deadline := time.Now().Add(time.Minute)
	for killed == nil {
		if time.Now().After(deadline) {
			t.Fatal("no worker took node n2")
		}
		for _, w := range workers {
			for _, ev := range w.all() {
				if ev["event"] == "took" && ev["node"] == "n2" {
					killed = w
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	killed.cmd.Process.Kill()
	select {
	case err := <-finished:
		if err != nil {
			t.Fatalf("run: %v\n%s", err, stderr.String())
		}
	case <-time.After(3 * time.Minute):
		run.Process.Kill()
		t.Fatalf("the run did not finish after a worker was killed\n%s", stderr.String())
	}
	st, err := status(t, hg, stores[2], "run-killed")
	if err != nil || st.Status != "done" {
		t.Fatalf("run: %+v %v", st, err)
	}
	out := stderr.String()
	t.Logf("hg run's stderr:\n%s", out)
	if !strings.Contains(out, "node n2: worker "+killed.key+" took it and went silent") || !strings.Contains(out, "waiting for redelivery") {
		t.Errorf("hg run did not say the killed worker went silent:\n%s", out)
	}
	if !strings.Contains(out, "has it now") {
		t.Errorf("hg run did not say who has the node now:\n%s", out)
	}
}

// What the NATS engine notices goes on a line of its own, escaped (a
// worker names itself as it likes), above the progress line, which is
// drawn again; on a pipe, just the line; after the run, no redraw.
func TestRunProgressNote(t *testing.T) {
	var term strings.Builder
	p := newRunProgress(&term, true, 2, nil)
	p.note("node a: worker \x1b[2Kevil took it and went silent")
	got := term.String()
	if !strings.Contains(got, "hg: node a: worker \\x1b[2Kevil took it and went silent\n\rhg: 0/2 nodes done") {
		t.Errorf("terminal: %q", got)
	}
	p.finish()
	term.Reset()
	p.note("reconnected")
	if term.String() != "hg: reconnected\n" {
		t.Errorf("after finish: %q", term.String())
	}
	var pipe strings.Builder
	p = newRunProgress(&pipe, false, 2, nil)
	p.note("lost the NATS server")
	p.finish()
	if pipe.String() != "hg: lost the NATS server\n" {
		t.Errorf("pipe: %q", pipe.String())
	}
}

package main

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// TestWorkerOverNATS runs a Work Order with `hg run --nats` on one store
// and the work on an `hg worker` with a store (and key) of its own, as on
// two machines: refused until the scheduler trusts the worker's key, done
// once it does.
func TestWorkerOverNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server and a worker")
	}
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	defer ns.Shutdown()
	url := ns.ClientURL()
	hg := hgBinary(t)
	workerStore := filepath.Join(t.TempDir(), "worker")
	schedStore := filepath.Join(t.TempDir(), "scheduler")
	for _, s := range []string{workerStore, schedStore} {
		if out, err := exec.Command(hg, "--store", s, "init").CombinedOutput(); err != nil {
			t.Fatalf("init: %v %s", err, out)
		}
	}
	worker := exec.Command(hg, "--store", workerStore, "worker", "--nats", url)
	stdout, err := worker.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var wlog bytes.Buffer
	worker.Stderr = &wlog
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		worker.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- worker.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			worker.Process.Kill()
			t.Error("the worker did not stop on SIGTERM")
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ed25519:") {
		t.Fatalf("worker's first line %q, %v; stderr: %s", line, err, wlog.String())
	}
	workerKey := strings.TrimSpace(line)
	wo, _ := filepath.Abs("../../fixtures/workorders/pipeline.json")

	// Not trusted: the worker's receipts are refused, the run halts (exit 3).
	run := exec.Command(hg, "--store", schedStore, "run", "--nats", url, "--run-id", "run-untrusted", wo)
	out, err := run.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("untrusted worker: %v\n%s", err, out)
	}
	st, err := status(t, hg, schedStore, "run-untrusted")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != "halted" {
		t.Fatalf("untrusted worker: run %s", st.Status)
	}
	refused := false
	for _, n := range st.Nodes {
		refused = refused || strings.Contains(n.Reason, "trusted signer")
	}
	if !refused {
		t.Errorf("untrusted worker: no node was refused for its signer: %+v", st.Nodes)
	}

	// Trusted: done, every node's receipt signed by the worker.
	run = exec.Command(hg, "--store", schedStore, "run", "--nats", url, "--trust", workerKey, "--no-cache", "--run-id", "run-trusted", wo)
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("trusted worker: %v\n%s\nworker: %s", err, out, wlog.String())
	}
	st, err = status(t, hg, schedStore, "run-trusted")
	if err != nil || st.Status != "done" {
		t.Fatalf("trusted worker: %+v %v", st, err)
	}
	// hg report checks the signer against the store's trust, as hg
	// verify does: a worker's receipt is not verified here (exit 4) until
	// the store trusts the worker.
	out, err = exec.Command(hg, "--store", schedStore, "report", st.Nodes[0].Receipt).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 4 || !strings.Contains(string(out), "NOT VERIFIED: signer not trusted") {
		t.Errorf("report of a worker's receipt before the store trusts it: %v\n%s", err, out)
	}
	if out, err := exec.Command(hg, "--store", schedStore, "key", "trust", workerKey).CombinedOutput(); err != nil {
		t.Fatalf("key trust: %v %s", err, out)
	}
	for _, n := range st.Nodes {
		out, err := exec.Command(hg, "--store", schedStore, "report", n.Receipt).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "status     PASS") {
			t.Errorf("node %s: report of %s: %v\n%s", n.Name, n.Receipt, err, out)
		}
	}
	// The scheduler's store holds the worker's receipts, and they are whole.
	if out, err := exec.Command(hg, "--store", schedStore, "fsck").CombinedOutput(); err != nil {
		t.Errorf("fsck: %v %s", err, out)
	}
}

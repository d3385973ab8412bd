package natsengine_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haygent/hg/scheduler/natsengine"
	"github.com/ipfs/go-cid"
)

// An engine's request names its package by CID and carries none of its
// blocks; a request of the version before, which did, is refused by name.
func TestPackageByReferenceWire(t *testing.T) {
	inv := echoInvocation(t)
	id := strings.Repeat("ab", 16)
	req := &natsengine.Request{ID: id, Reply: "hg.result." + strings.Repeat("cd", 16) + "." + id, Deadline: time.Now().Add(time.Minute), Invocation: inv}
	data, err := natsengine.EncodeRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range inv.PackageBlocks {
		if len(b.Data()) >= 32 && bytes.Contains(data, b.Data()) {
			t.Fatalf("package block %s is in the message", b.CID())
		}
	}
	got, err := natsengine.DecodeRequest(data)
	if err != nil {
		t.Fatal(err)
	}
	if got.Inline || len(got.Invocation.PackageBlocks) != 0 || got.Invocation.Package != inv.Package {
		t.Fatalf("decoded inline %v with %d package blocks, package %s; want by reference to %s", got.Inline, len(got.Invocation.PackageBlocks), got.Invocation.Package, inv.Package)
	}

	old := bytes.Replace(data, []byte(natsengine.TypeRequest), []byte("hg/nats-invocation@1"), 1)
	if bytes.Equal(old, data) {
		t.Fatal("no type in the message")
	}
	if _, err := natsengine.DecodeRequest(old); !errors.Is(err, natsengine.ErrRefused) || !strings.Contains(err.Error(), natsengine.TypeRequest) {
		t.Fatalf("a version 1 request: %v, want refused naming %s", err, natsengine.TypeRequest)
	}
}

// The engine puts a package's blocks in the blocks bucket once, and a
// worker fetches them once, whatever the number of invocations of it.
func TestPackageTravelsOnce(t *testing.T) {
	url := startServer(t)
	var mu sync.Mutex
	fetched, put := map[cid.Cid]int{}, map[cid.Cid]int{}
	startWorker(t, url, natsengine.WorkerOptions{Key: workerKeys[0], Workspaces: natsengine.WorkspaceOptions{
		Fetched: func(c cid.Cid, _ int) { mu.Lock(); fetched[c]++; mu.Unlock() },
	}})
	e := newEngine(t, url, natsengine.Options{Timeout: 60 * time.Second,
		BlockPut: func(c cid.Cid, _ int) { mu.Lock(); put[c]++; mu.Unlock() }})
	inv := echoInvocation(t)
	for _, node := range []string{"a", "b", "c"} {
		inv.Node = node
		if _, err := e.Invoke(context.Background(), inv); err != nil {
			t.Fatalf("node %s: %v", node, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, b := range inv.PackageBlocks {
		if put[b.CID()] != 1 || fetched[b.CID()] != 1 {
			t.Errorf("package block %s put %d and fetched %d times, want once each", b.CID(), put[b.CID()], fetched[b.CID()])
		}
	}
	if len(fetched) != len(inv.PackageBlocks) {
		t.Errorf("fetched %d blocks, want the package's %d", len(fetched), len(inv.PackageBlocks))
	}
}

// A package block in the bucket that does not match its CID, or missing
// from it, is refused with an error answer and nothing run; the worker
// keeps nothing it did not verify, so the package made whole runs.
func TestPackageHostileBucket(t *testing.T) {
	url := startServer(t)
	startWorker(t, url, natsengine.WorkerOptions{Key: workerKeys[0]})
	h := newHandEngine(t, url)
	inv := echoInvocation(t)

	state, msg := h.send(inv, false)
	if state != "error" || !strings.Contains(msg, "is not in the blocks bucket") || !strings.Contains(msg, "package") {
		t.Fatalf("package not in the bucket: %s %q, want an error naming the package", state, msg)
	}

	big := 0
	for i, b := range inv.PackageBlocks {
		if len(b.Data()) > len(inv.PackageBlocks[big].Data()) {
			big = i
		}
	}
	h.put(inv.PackageBlocks...)
	bad := bytes.Clone(inv.PackageBlocks[big].Data())
	bad[len(bad)/2] ^= 1
	h.putBytes(inv.PackageBlocks[big].CID(), bad)
	state, msg = h.send(inv, false)
	if state != "error" || !strings.Contains(msg, "is corrupt") {
		t.Fatalf("tampered package block: %s %q, want refused as corrupt", state, msg)
	}

	h.put(inv.PackageBlocks[big])
	if state, msg := h.send(inv, false); state != "done" {
		t.Fatalf("the package made whole: %s %q, want done", state, msg)
	}
}

package natsengine_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
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
	"github.com/ipfs/go-cid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// wsPackage writes a builtin-only package into dir/name: the roundtrip
// fixture with the given permissions and spine, and one gate that a file
// was digested.
func wsPackage(t *testing.T, dir, name, grants, spine, file string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.CopyFS(p, os.DirFS("../../fixtures/haygents/roundtrip")); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"permissions.json": `{"grants": [` + grants + `, "network:none", "secret:none", "publish:none", "spend:none"], "deny": ["read:file:secret.txt"]}`,
		"spine/spine.json": `{"steps": ` + spine + `}`,
		"gates/gates.json": `{"gates": [{"id": "SEEN", "evidence": "digest", "subject": "file:` + file + `", "predicate": "ev.size > 0",
			"on_missing": "halt", "on_stale": "halt", "on_invalid": "halt", "on_contradictory": "halt", "on_timeout": "halt"}]}`,
	}
	for f, content := range files {
		if err := os.WriteFile(filepath.Join(p, f), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func mustWrite(t *testing.T, p string, content []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, content, 0o644); err != nil {
		t.Fatal(err)
	}
}

// wsOrder writes a Work Order into a new directory: a writer node that
// starts from the directory ws (files as given) and writes out.txt, and a
// reader node that starts from the writer's final workspace and digests
// out.txt. The writer may not read secret.txt.
func wsOrder(t *testing.T, files map[string][]byte) (file, ws string) {
	t.Helper()
	dir := t.TempDir()
	writer := wsPackage(t, dir, "writer", `"read:file:**", "write:file:out.txt"`,
		`[{"id": "write", "kind": "builtin", "op": "write_file", "args": {"path": "out.txt", "template": "written by the writer\n"}},
		  {"id": "digest", "kind": "builtin", "op": "digest", "args": {"file": "data.txt"}}]`, "data.txt")
	reader := wsPackage(t, dir, "reader", `"read:file:**"`,
		`[{"id": "digest", "kind": "builtin", "op": "digest", "args": {"file": "out.txt"}}]`, "out.txt")
	ws = filepath.Join(dir, "ws")
	for p, content := range files {
		mustWrite(t, filepath.Join(ws, p), content)
	}
	wo := map[string]any{
		"workorder": "edges", "objective": "hand a workspace along an edge",
		"nodes": map[string]any{
			"writer": map[string]any{"haygent": writer, "workspace": "ws"},
			"reader": map[string]any{"haygent": reader, "needs": []string{"writer"}, "workspace": map[string]any{"from": "writer"}},
		},
	}
	data, err := json.Marshal(wo)
	if err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(dir, "edges.json")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return file, ws
}

// runOrder runs the Work Order file on engine e (nil: in this process)
// against st and returns the run's id and record.
func runOrder(t *testing.T, file string, st cas.Store, e scheduler.Engine, trusted []ed25519.PublicKey) (string, *scheduler.Record) {
	t.Helper()
	plan, err := scheduler.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	s := scheduler.New(scheduler.Options{Engine: e, Trusted: trusted, Store: scheduler.Shared{Store: st}, Key: schedulerKey})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	id, err := s.Start(ctx, plan, "")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.Execute(ctx, plan, id)
	if err != nil {
		t.Fatal(err)
	}
	return id, rec
}

func receiptOf(t *testing.T, st cas.Store, rec *scheduler.Record, name string) *ledger.Receipt {
	t.Helper()
	for _, n := range rec.Nodes {
		if n.Name == name {
			if n.State != dag.Done || n.Receipt == nil {
				t.Fatalf("node %s: %s %q", name, n.State, n.Reason)
			}
			r, err := ledger.LoadReceipt(context.Background(), st, n.Receipt.Cid)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
	}
	t.Fatalf("no node %s", name)
	return nil
}

// treeBlocks stores the directory dir as a tree in a new store and returns
// its root and every block of it.
func treeBlocks(t *testing.T, dir string) (cid.Cid, []cas.Block) {
	t.Helper()
	ctx := context.Background()
	ms := memstore.New()
	root, err := cas.PutTree(ctx, ms, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []cas.Block
	err = ms.AllKeys(ctx, func(c cid.Cid, _ int) error {
		data, err := ms.Get(ctx, c)
		if err != nil {
			return err
		}
		b, err := cas.NewBlockWithCID(c, data)
		blocks = append(blocks, b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return root, blocks
}

// A request names its workspace by its root; the blocks do not travel in
// the message.
func TestWorkspaceRequestWire(t *testing.T) {
	dir := t.TempDir()
	secret := bytes.Repeat([]byte("workspace bytes "), 64)
	mustWrite(t, filepath.Join(dir, "f.txt"), secret)
	root, blocks := treeBlocks(t, dir)
	inv := echoInvocation(t)
	inv.Workspace, inv.WorkspaceBlocks = root, blocks
	id := strings.Repeat("ab", 16)
	data, err := natsengine.EncodeRequest(&natsengine.Request{ID: id, Reply: "hg.result." + strings.Repeat("cd", 16) + "." + id, Deadline: time.Now().Add(time.Minute), Invocation: inv})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, secret[:64]) {
		t.Error("the workspace's bytes are in the message")
	}
	got, err := natsengine.DecodeRequest(data)
	if err != nil {
		t.Fatal(err)
	}
	if got.Invocation.Workspace != root || len(got.Invocation.WorkspaceBlocks) != 0 {
		t.Errorf("decoded workspace %s with %d blocks, want %s and none", got.Invocation.Workspace, len(got.Invocation.WorkspaceBlocks), root)
	}
	// A request without a workspace has no workspace field at all.
	inv.Workspace, inv.WorkspaceBlocks = cid.Undef, nil
	data, err = natsengine.EncodeRequest(&natsengine.Request{ID: id, Reply: "r", Deadline: time.Now(), Invocation: inv})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("workspace")) {
		t.Error("a request without a workspace names one")
	}
}

// handEngine plays an engine by hand: it publishes requests and reads the
// worker's answers.
type handEngine struct {
	t      *testing.T
	js     jetstream.JetStream
	blocks jetstream.ObjectStore
	engine string
}

func newHandEngine(t *testing.T, url string) *handEngine {
	t.Helper()
	newEngine(t, url, natsengine.Options{}) // makes the streams and buckets
	js, err := jetstream.New(connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	obs, err := js.ObjectStore(context.Background(), "HG_BLOCKS")
	if err != nil {
		t.Fatal(err)
	}
	return &handEngine{t: t, js: js, blocks: obs, engine: strings.Repeat("cd", 16)}
}

// put puts blocks in the blocks bucket as they are.
func (h *handEngine) put(blocks ...cas.Block) {
	h.t.Helper()
	for _, b := range blocks {
		h.putBytes(b.CID(), b.Data())
	}
}

func (h *handEngine) putBytes(c cid.Cid, data []byte) {
	h.t.Helper()
	if _, err := h.blocks.PutBytes(context.Background(), natsengine.BlockObject(c), data); err != nil {
		h.t.Fatal(err)
	}
}

// invoke publishes the echo invocation, its package inline, on workspace
// root and returns the worker's last answer: its state and error.
func (h *handEngine) invoke(root cid.Cid) (state, msg string) {
	h.t.Helper()
	inv := echoInvocation(h.t)
	inv.Workspace = root
	return h.send(inv, true)
}

// send publishes inv, its package inline or not, and returns the worker's
// last answer.
func (h *handEngine) send(inv scheduler.Invocation, inline bool) (state, msg string) {
	h.t.Helper()
	id := fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64())
	req := &natsengine.Request{ID: id, Reply: "hg.result." + h.engine + "." + id, Deadline: time.Now().Add(time.Minute), Invocation: inv, Inline: inline}
	data, err := natsengine.EncodeRequest(req)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second) // generous: a loaded machine under -race
	defer cancel()
	cons, err := h.js.CreateConsumer(ctx, "HG_RESULTS", jetstream.ConsumerConfig{FilterSubject: req.Reply, AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.js.Publish(ctx, "hg.work."+id, data); err != nil {
		h.t.Fatal(err)
	}
	for {
		msg, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			h.t.Fatalf("no answer from the worker (it hangs?): %v", err)
		}
		_ = msg.Ack()
		n, err := cas.DecodeNode(msg.Data())
		if err != nil {
			h.t.Fatal(err)
		}
		m := n.(map[string]any)
		e, _ := m["error"].(string)
		return m["state"].(string), e
	}
}

// A worker refuses, with an error answer and without running anything, a
// workspace with a block that does not match its CID, one whose blocks
// are not all in the bucket, a tree over its limits (the blocks it would
// have to fetch), and an object too big to be a block; it neither hangs
// nor caches what it did not verify.
func TestWorkspaceHostileEngine(t *testing.T) {
	url := startServer(t)
	var mu sync.Mutex
	fetched := map[cid.Cid]int{}
	startWorker(t, url, natsengine.WorkerOptions{Key: workerKeys[0], Workspaces: natsengine.WorkspaceOptions{
		MaxBlocks: 8, MaxBytes: 1 << 20,
		Fetched: func(c cid.Cid, _ int) { mu.Lock(); fetched[c]++; mu.Unlock() },
	}})
	h := newHandEngine(t, url)

	tree := func(files map[string][]byte) (cid.Cid, []cas.Block) {
		dir := t.TempDir()
		for p, content := range files {
			mustWrite(t, filepath.Join(dir, p), content)
		}
		return treeBlocks(t, dir)
	}
	big := func(blocks []cas.Block) int {
		j := 0
		for i, b := range blocks {
			if len(b.Data()) > len(blocks[j].Data()) {
				j = i
			}
		}
		return j
	}
	check := func(name, state, msg, want string) {
		t.Helper()
		if state != "error" || !strings.Contains(msg, want) {
			t.Errorf("%s: answer %s %q, want an error saying %q", name, state, msg, want)
		}
	}

	// A block that does not match its CID.
	root, blocks := tree(map[string][]byte{"a.txt": bytes.Repeat([]byte("a"), 5000), "b.txt": []byte("b\n")})
	i := big(blocks)
	h.put(blocks...)
	bad := bytes.Clone(blocks[i].Data())
	bad[len(bad)/2] ^= 1
	h.putBytes(blocks[i].CID(), bad)
	state, msg := h.invoke(root)
	check("tampered block", state, msg, "is corrupt")
	// The tampered block was not cached: with the right bytes in the
	// bucket, it is fetched again and the invocation runs.
	h.put(blocks[i])
	if state, msg := h.invoke(root); state != "done" {
		t.Errorf("the workspace made whole: %s %q, want done", state, msg)
	}
	mu.Lock()
	if fetched[blocks[i].CID()] != 1 {
		t.Errorf("the block fetched %d times whole, want once", fetched[blocks[i].CID()])
	}
	mu.Unlock()

	// Blocks missing from the bucket: the root, then one below it.
	root, blocks = tree(map[string][]byte{"c.txt": []byte("c\n"), "d/e.txt": []byte("e\n")})
	state, msg = h.invoke(root)
	check("nothing in the bucket", state, msg, "is not in the blocks bucket")
	for _, b := range blocks {
		if b.CID() != root && len(b.Data()) == len("e\n") {
			continue
		}
		h.put(b)
	}
	state, msg = h.invoke(root)
	check("a block missing", state, msg, "is not in the blocks bucket")

	// A tree of more blocks than the worker takes: refused once the walk
	// has read more links than that, before it fetches them.
	files := map[string][]byte{}
	for i := range 40 {
		files[fmt.Sprintf("f%02d.txt", i)] = []byte(fmt.Sprintf("file %d\n", i))
	}
	root, blocks = tree(files)
	h.put(blocks...)
	before := len(fetched)
	state, msg = h.invoke(root)
	check("too many blocks", state, msg, "over the worker's limit of 8 blocks")
	if n := len(fetched) - before; n > 1 {
		t.Errorf("fetched %d blocks of a tree over the limit, want only its root", n)
	}

	// More bytes than the worker takes.
	root, blocks = tree(map[string][]byte{"big.bin": pseudoRandom(3<<20, 7)})
	h.put(blocks...)
	state, msg = h.invoke(root)
	check("too many bytes", state, msg, "over the worker's limit of 1048576 bytes")

	// An object over the block limit under a block's name is not read.
	root, _ = tree(map[string][]byte{"g.txt": []byte("g\n")})
	h.putBytes(root, make([]byte, cas.MaxBlockSize+1))
	state, msg = h.invoke(root)
	check("oversized object", state, msg, "over the block limit")
}

// The engine refuses a workspace whose root is not among its blocks
// before it queues anything, and puts again a block whose object in the
// bucket is not the block's bytes (someone else's garbage under its name).
func TestWorkspaceEngineChecks(t *testing.T) {
	url := startServer(t)
	var mu sync.Mutex
	put := map[cid.Cid]int{}
	e := newEngine(t, url, natsengine.Options{Timeout: 30 * time.Second,
		BlockPut: func(c cid.Cid, _ int) { mu.Lock(); put[c]++; mu.Unlock() }})
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "a.txt"), []byte("a\n"))
	root, blocks := treeBlocks(t, dir)
	inv := echoInvocation(t)
	inv.Workspace = root
	for _, b := range blocks {
		if b.CID() != root {
			inv.WorkspaceBlocks = append(inv.WorkspaceBlocks, b)
		}
	}
	if _, err := e.Invoke(context.Background(), inv); err == nil || !strings.Contains(err.Error(), "its root is not among") {
		t.Fatalf("Invoke without the root's block: %v", err)
	}
	js, _ := jetstream.New(connect(t, url))
	stream, err := js.Stream(context.Background(), "HG_WORK")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := stream.Info(context.Background()); err != nil || info.State.LastSeq != 0 {
		t.Errorf("queued %d messages for a refused invocation (%v)", info.State.LastSeq, err)
	}

	obs, err := js.ObjectStore(context.Background(), "HG_BLOCKS")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(context.Background(), natsengine.BlockObject(root), []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	startWorker(t, url, natsengine.WorkerOptions{Key: workerKeys[0]})
	inv.WorkspaceBlocks = blocks
	if _, err := e.Invoke(context.Background(), inv); err != nil {
		t.Fatalf("Invoke over garbage in the bucket: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if put[root] != 1 || len(put) != len(blocks)+len(inv.PackageBlocks) {
		t.Errorf("put %v, want every block once", put)
	}
}

// A worker fetches a workspace block once: a second invocation on the
// same tree takes every block from its cache, and the engine puts none
// again.
func TestWorkspaceWorkerCache(t *testing.T) {
	url := startServer(t)
	fetched, put := 0, 0
	var mu sync.Mutex
	startWorker(t, url, natsengine.WorkerOptions{Key: workerKeys[0], Workspaces: natsengine.WorkspaceOptions{
		Fetched: func(cid.Cid, int) { mu.Lock(); fetched++; mu.Unlock() },
	}})
	e := newEngine(t, url, natsengine.Options{Timeout: 30 * time.Second, BlockPut: func(cid.Cid, int) { mu.Lock(); put++; mu.Unlock() }})
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "a.bin"), pseudoRandom(3<<20, 3))
	mustWrite(t, filepath.Join(dir, "sub/b.txt"), []byte("b\n"))
	root, blocks := treeBlocks(t, dir)
	inv := echoInvocation(t)
	inv.Workspace, inv.WorkspaceBlocks = root, blocks
	for i, node := range []string{"first", "second"} {
		inv.Node = node
		out, err := e.Invoke(context.Background(), inv)
		if err != nil {
			t.Fatal(err)
		}
		have := map[cid.Cid]bool{}
		for _, b := range out.Blocks {
			have[b.CID()] = true
		}
		for _, b := range blocks {
			if !have[b.CID()] {
				t.Errorf("%s: the outcome lacks workspace block %s", node, b.CID())
			}
		}
		mu.Lock()
		want := 0
		if i == 0 {
			want = len(blocks) + len(inv.PackageBlocks) // the package travels the same way
		}
		if fetched != want || put != want {
			t.Errorf("%s: fetched %d and put %d blocks, want %d", node, fetched, put, want)
		}
		fetched, put = 0, 0
		mu.Unlock()
	}
}

// Invocations on the same tree at once put each of its blocks once.
func TestWorkspaceConcurrentPutOnce(t *testing.T) {
	url := startServer(t)
	for _, k := range workerKeys {
		startWorker(t, url, natsengine.WorkerOptions{Key: k, Jobs: 2})
	}
	var mu sync.Mutex
	put := map[cid.Cid]int{}
	e := newEngine(t, url, natsengine.Options{Timeout: 30 * time.Second, BlockPut: func(c cid.Cid, _ int) { mu.Lock(); put[c]++; mu.Unlock() }})
	dir := t.TempDir()
	for i := range 6 {
		mustWrite(t, filepath.Join(dir, fmt.Sprintf("f%d.bin", i)), pseudoRandom(300<<10, byte(10+i)))
	}
	root, blocks := treeBlocks(t, dir)
	inv := echoInvocation(t)
	inv.Workspace, inv.WorkspaceBlocks = root, blocks
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			inv := inv
			inv.Node = fmt.Sprintf("n%d", i)
			if _, err := e.Invoke(context.Background(), inv); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for _, b := range blocks {
		if put[b.CID()] != 1 {
			t.Errorf("block %s put %d times, want once", b.CID(), put[b.CID()])
		}
	}
}

// A workspace node runs through NATS exactly as in this process: the
// same trees, the same acceptance, and a run that verifies.
func TestWorkspaceEdgeOnWorkers(t *testing.T) {
	files := map[string][]byte{"data.txt": []byte("the data\n"), "secret.txt": []byte("no one reads this\n"), "sub/deep.txt": []byte("deep\n")}
	file, _ := wsOrder(t, files)

	local := memstore.New()
	_, lrec := runOrder(t, file, local, nil, nil)
	if lrec.Status != scheduler.StatusDone {
		t.Fatalf("local run: %s %s", lrec.Status, lrec.Reason)
	}

	url := startServer(t)
	for _, k := range workerKeys {
		startWorker(t, url, natsengine.WorkerOptions{Key: k})
	}
	e := newEngine(t, url, natsengine.Options{Timeout: time.Minute})
	st := memstore.New()
	trusted := []ed25519.PublicKey{pub(workerKeys[0]), pub(workerKeys[1])}
	id, rec := runOrder(t, file, st, e, trusted)
	if rec.Status != scheduler.StatusDone {
		t.Fatalf("run on workers: %s %s", rec.Status, rec.Reason)
	}
	for _, name := range []string{"writer", "reader"} {
		l, r := receiptOf(t, local, lrec, name), receiptOf(t, st, rec, name)
		if l.Workspace.Cid != r.Workspace.Cid || l.FinalWorkspace.Cid != r.FinalWorkspace.Cid || r.Status != ledger.StatusPass {
			t.Errorf("%s: on workers %s -> %s (%s), in this process %s -> %s", name, r.Workspace.Cid, r.FinalWorkspace.Cid, r.Status, l.Workspace.Cid, l.FinalWorkspace.Cid)
		}
	}
	if w, r := receiptOf(t, st, rec, "writer"), receiptOf(t, st, rec, "reader"); r.Workspace.Cid != w.FinalWorkspace.Cid {
		t.Errorf("the reader started from %s, not the writer's final workspace %s", r.Workspace.Cid, w.FinalWorkspace.Cid)
	}
	root, err := st.GetRef(context.Background(), scheduler.RefNamespace, id)
	if err != nil {
		t.Fatal(err)
	}
	v, err := scheduler.VerifyRun(context.Background(), st, root, trusted, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !v.OK() {
		node, c := v.FirstFailure()
		t.Fatalf("the run does not verify: %s %+v", node, c)
	}
}

// pseudoRandom returns n bytes that neither compress nor repeat, the same
// for the same seed.
func pseudoRandom(n int, seed byte) []byte {
	var s [32]byte
	s[0] = seed
	out := make([]byte, n)
	_, _ = rand.NewChaCha8(s).Read(out)
	return out
}

// meter runs invocations one at a time on an engine and counts, by node,
// the workspace blocks the engine put in the blocks bucket.
type meter struct {
	e  *natsengine.Engine
	nc *nats.Conn // the engine's

	mu   sync.Mutex
	node string
	put  map[string]map[cid.Cid]int // node -> block -> bytes
	out  map[string]uint64          // node -> bytes the engine's connection sent
}

func (m *meter) blockPut(c cid.Cid, size int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.put[m.node] == nil {
		m.put[m.node] = map[cid.Cid]int{}
	}
	m.put[m.node][c] += size
}

func (m *meter) Invoke(ctx context.Context, inv scheduler.Invocation) (scheduler.Outcome, error) {
	m.mu.Lock()
	m.node = inv.Node
	m.mu.Unlock()
	before := m.nc.Stats().OutBytes
	out, err := m.e.Invoke(ctx, inv)
	m.mu.Lock()
	m.out[inv.Node] = m.nc.Stats().OutBytes - before
	m.mu.Unlock()
	return out, err
}

func sum(m map[cid.Cid]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

// Two nodes share a 50 MB workspace (8 MB under -short) over two workers:
// the writer's invocation puts every block of it in the bucket, the
// reader's (which starts from the writer's final workspace: the same tree
// and out.txt) puts none of those again, only the few the writer made;
// and no worker fetches a block twice.
func TestWorkspaceSharedOnce(t *testing.T) {
	size := 50 << 20
	if testing.Short() {
		size = 8 << 20
	}
	file, ws := wsOrder(t, map[string][]byte{
		"data.txt": []byte("the data\n"), "big/one.bin": pseudoRandom(size-size/4, 1), "big/two.bin": pseudoRandom(size/4, 2),
	})
	_, given := treeBlocks(t, ws)
	inGiven := map[cid.Cid]bool{}
	givenBytes := 0
	for _, b := range given {
		inGiven[b.CID()] = true
		givenBytes += len(b.Data())
	}

	url := startServer(t)
	var mu sync.Mutex
	fetched := map[string]map[cid.Cid]int{}
	for i, k := range workerKeys {
		name := fmt.Sprintf("worker%d", i)
		fetched[name] = map[cid.Cid]int{}
		startWorker(t, url, natsengine.WorkerOptions{Key: k, Workspaces: natsengine.WorkspaceOptions{
			Fetched: func(c cid.Cid, size int) { mu.Lock(); fetched[name][c]++; mu.Unlock() },
		}})
	}
	m := &meter{put: map[string]map[cid.Cid]int{}, out: map[string]uint64{}, nc: connect(t, url)}
	var err error
	if m.e, err = natsengine.New(m.nc, natsengine.Options{Timeout: 3 * time.Minute, BlockPut: m.blockPut, Log: t.Logf}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.e.Close() })
	st := memstore.New()
	start := time.Now()
	_, rec := runOrder(t, file, st, m, []ed25519.PublicKey{pub(workerKeys[0]), pub(workerKeys[1])})
	if rec.Status != scheduler.StatusDone {
		t.Fatalf("run: %s %s", rec.Status, rec.Reason)
	}
	t.Logf("ran in %v", time.Since(start).Round(time.Millisecond))
	w, r := receiptOf(t, st, rec, "writer"), receiptOf(t, st, rec, "reader")
	if r.Workspace.Cid != w.FinalWorkspace.Cid {
		t.Fatalf("the reader started from %s, not the writer's final workspace %s", r.Workspace.Cid, w.FinalWorkspace.Cid)
	}

	first, second := m.put["writer"], m.put["reader"]
	t.Logf("workspace of %d blocks, %d bytes; put for the writer: %d blocks, %d bytes; for the reader: %d blocks, %d bytes",
		len(given), givenBytes, len(first), sum(first), len(second), sum(second))
	t.Logf("the engine's connection sent %d bytes for the writer, %d for the reader", m.out["writer"], m.out["reader"])
	for c := range inGiven {
		if first[c] == 0 {
			t.Errorf("block %s of the workspace was not put for the writer", c)
		}
	}
	for c, n := range second {
		if inGiven[c] {
			t.Errorf("block %s of the shared workspace was put again for the reader (%d bytes)", c, n)
		}
	}
	if sum(first) < size || sum(second) > 64<<10 {
		t.Errorf("put %d bytes for the writer and %d for the reader, want at least %d and at most 64 KiB", sum(first), sum(second), size)
	}
	// Everything the engine sent for the reader (its message, the new
	// blocks, the bucket's lookups) is far less than one chunk of the tree.
	if m.out["reader"] > cas.ChunkSize/4 {
		t.Errorf("the engine sent %d bytes for the reader", m.out["reader"])
	}
	mu.Lock()
	defer mu.Unlock()
	for name, got := range fetched {
		n := 0
		for c, k := range got {
			n += k
			if k > 1 {
				t.Errorf("%s fetched block %s %d times", name, c, k)
			}
		}
		t.Logf("%s fetched %d blocks", name, n)
	}
}

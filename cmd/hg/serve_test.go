package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/boltstore"
	"github.com/haygent/hg/cas/boltstore/boltstoretest"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/internal/tamper"
	"github.com/haygent/hg/scheduler"
	"github.com/haygent/hg/web"
	"github.com/ipfs/go-cid"
)

// Hostile strings a forged ledger or a workspace holds, to run script in
// a page that shows them.
const (
	hostileStep      = `<script>document.title="pwned-step"</script>`
	hostileObjective = `<img src=x onerror="document.title='pwned-objective'">`
	hostileFile      = `<img src=x onerror=alert(1)>.txt`
	hostileNotes     = `<script>document.title='pwned-notes'</script>`
)

// serveFixture is a store holding a done run (run-ok), a halted run
// (run-halt), a run one of whose receipts was rewritten by someone
// holding the runner key, with a script for a step id and an image for
// the objective (run-tampered, node seed), and a tree whose file name is
// HTML.
type serveFixture struct {
	dir      string
	hg       func(args ...string) (string, string, int)
	tampered cid.Cid // the rewritten receipt of run-tampered's seed
	tree     cid.Cid // a tree holding hostileFile
}

func newServeFixture(t *testing.T) *serveFixture {
	t.Helper()
	f := &serveFixture{dir: filepath.Join(t.TempDir(), ".haygent")}
	f.hg = func(args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"--store", f.dir}, args...), strings.NewReader(""), &stdout, &stderr)
		return stdout.String(), stderr.String(), code
	}
	wo := func(name string) string { return filepath.Join("..", "..", "fixtures", "workorders", name) }
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, hostileFile), []byte("<script>alert(1)</script>"), 0o644); err != nil {
		t.Fatal(err)
	}
	answers := filepath.Join(t.TempDir(), "answers.json")
	if err := os.WriteFile(answers, []byte(`{"platform": "linux", "channel": "beta", "retention": 30, "notes": "`+hostileNotes+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init"}, {"key", "gen"},
		{"run", "--run-id", "run-ok", wo("pipeline.json")},
		{"run", "--run-id", "run-release", "--answers", answers, wo("release.json")},
		{"run", "--run-id", "run-halt", wo("halting-branch.json")},
		{"run", "--no-cache", "--run-id", "run-tampered", wo("pipeline.json")},
		{"put", "-r", ws}} {
		out, errOut, code := f.hg(args...)
		if want := map[bool]int{true: exitHalt, false: 0}[args[len(args)-1] == wo("halting-branch.json")]; code != want {
			t.Fatalf("hg %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		if args[0] == "put" {
			c, err := cas.ParseCID(strings.TrimSpace(out))
			if err != nil {
				t.Fatal(err)
			}
			f.tree = c
		}
	}
	f.tampered = f.rewriteNode(t, "run-tampered", "seed", nil, func(typ string, n map[string]any) {
		switch typ {
		case ledger.TypeTransition:
			if n["seq"] == int64(0) {
				n["step"] = hostileStep
			}
		case ledger.TypeReceipt:
			n["objective"] = hostileObjective
		}
	})
	return f
}

// rewriteNode rewrites the receipt of a node of a run (tamper.Rewrite),
// signed with key (nil: the store's runner key), and points the run's
// record at it, as a forger with the key and the store would.
func (f *serveFixture) rewriteNode(t *testing.T, run, node string, key ed25519.PrivateKey, edit func(typ string, n map[string]any)) cid.Cid {
	t.Helper()
	ctx := context.Background()
	st, err := boltstore.Open(f.dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if key == nil {
		if key, err = ledger.LoadKey(keyPath(f.dir)); err != nil {
			t.Fatal(err)
		}
	}
	rec, _, err := scheduler.LoadRecord(ctx, st, run)
	if err != nil {
		t.Fatal(err)
	}
	var old cid.Cid
	for _, n := range rec.Nodes {
		if n.Name == node {
			old = n.Receipt.Cid
		}
	}
	nc, err := tamper.Rewrite(ctx, st, old, key, edit)
	if err != nil {
		t.Fatal(err)
	}
	root, err := st.GetRef(ctx, scheduler.RefNamespace, run)
	if err != nil {
		t.Fatal(err)
	}
	rc, n, err := tamper.EditRecord(ctx, st, root, nil, func(m map[string]any) bool {
		if m["name"] != node {
			return false
		}
		m["receipt"] = nc
		return true
	})
	if err != nil || n != 1 {
		t.Fatalf("edit the record of %s: %d nodes, %v", run, n, err)
	}
	if err := st.SetRef(ctx, scheduler.RefNamespace, run, rc); err != nil {
		t.Fatal(err)
	}
	return nc
}

// handler is the server hg serve runs for the fixture's store, without
// a listener.
func (f *serveFixture) handler(t *testing.T) http.Handler {
	t.Helper()
	s, err := web.New(serveConfig(f.dir, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// getPage gets target from h and returns the status and the body.
func getPage(h http.Handler, target string) (int, string) {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
	return w.Code, w.Body.String()
}

// storeFiles hashes every file of the store directory.
func storeFiles(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[p] = sha256.Sum256(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var hrefRE = regexp.MustCompile(`href="(/[^"]*)"`)

// TestServeReadOnly: a crawl of every page the server links, from the
// runs page down to the downloads, with the live view of each finished
// run, leaves every file of the store as it was, byte for byte, and every
// page linked is served (no dead link, no error page).
func TestServeReadOnly(t *testing.T) {
	f := newServeFixture(t)
	h := f.handler(t)
	before := storeFiles(t, f.dir)
	seen := map[string]bool{}
	queue := []string{"/runs", "/beliefs", "/trees/" + f.tree.String() + "/", "/runs/run-ok/events"}
	for len(queue) > 0 {
		target := queue[0]
		queue = queue[1:]
		if seen[target] {
			continue
		}
		seen[target] = true
		code, body := getPage(h, strings.ReplaceAll(target, "&amp;", "&"))
		if code != http.StatusOK {
			t.Errorf("%s: %d\n%s", target, code, body)
			continue
		}
		for _, m := range hrefRE.FindAllStringSubmatch(body, -1) {
			if !strings.HasPrefix(m[1], "/static/") {
				queue = append(queue, m[1])
			}
		}
	}
	t.Logf("crawled %d pages", len(seen))
	if len(seen) < 40 {
		t.Errorf("the crawl reached %d pages only", len(seen))
	}
	for _, want := range []string{"/runs/run-halt/nodes/probe", "/runs/run-tampered/nodes/seed", "/receipts/" + f.tampered.String(), "/beliefs/release", "/runs/run-release"} {
		if !seen[want] {
			t.Errorf("the crawl never reached %s", want)
		}
	}
	after := storeFiles(t, f.dir)
	if len(before) != len(after) {
		t.Errorf("the store had %d files, has %d", len(before), len(after))
	}
	for p, sum := range before {
		if after[p] != sum {
			t.Errorf("%s changed", p)
		}
	}
}

// TestServeVerdictNow: each page's verdict is the store's and the trust
// list's as they are when it is served: a receipt signed by a key the
// store does not trust reads "signer not trusted" and never PASS, then
// "verified" and PASS once 'hg key trust' adds the key, with the same
// server; a block of a verified receipt damaged on disk while the server
// runs makes it "broken", naming the block, and the receipt built from
// it broken by its upstream; a block of a package tree damaged breaks
// every receipt that runs the package.
func TestServeVerdictNow(t *testing.T) {
	f := newServeFixture(t)
	h := f.handler(t)
	verdictRE := regexp.MustCompile(`<p class="verdictline">verdict: <span [^>]*>([^<]*)</span> · status: <span id="receipt-status" class="status">([^<]*)</span>`)
	verdict := func(target string) (string, string) {
		t.Helper()
		code, body := getPage(h, target)
		m := verdictRE.FindStringSubmatch(body)
		if code != http.StatusOK || m == nil {
			t.Fatalf("%s: %d, no verdict\n%s", target, code, body)
		}
		return m[1], m[2]
	}
	if v, s := verdict("/runs/run-ok/nodes/left"); v != "verified" || s != "PASS" {
		t.Fatalf("left: %s, %s", v, s)
	}
	// left's receipt made again and signed by another key, the record
	// pointed at it: alone, the receipt follows the trust list; as the
	// node's work in the run, it is no receipt the scheduler accepted.
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	forged := f.rewriteNode(t, "run-ok", "left", other, func(string, map[string]any) {})
	if v, s := verdict("/receipts/" + forged.String()); v != "signer not trusted" || s == "PASS" {
		t.Errorf("signed by another key: %s, %s", v, s)
	}
	if out, errOut, code := f.hg("key", "trust", ledger.FormatPublicKey(other.Public().(ed25519.PublicKey))); code != 0 {
		t.Fatalf("key trust: %d %s%s", code, out, errOut)
	}
	if v, s := verdict("/receipts/" + forged.String()); v != "verified" || s != "PASS" {
		t.Errorf("once trusted: %s, %s", v, s)
	}
	if v, s := verdict("/runs/run-ok/nodes/left"); !strings.HasPrefix(v, "broken: acceptance: ") || s == "PASS" {
		t.Errorf("the forged receipt as left's work: %s, %s", v, s)
	}
	if _, body := getPage(h, "/runs/run-ok/nodes/left"); !strings.Contains(body, `id="node-problem">not verified: acceptance: `) {
		t.Errorf("left's page does not say its record's claim fails")
	}
	if _, body := getPage(h, "/runs/run-ok"); !strings.Contains(body, `id="verify-problem">left: acceptance: `) || strings.Contains(body, "The outcome holds") {
		t.Errorf("the run page does not say the run's verification fails at left")
	}
	// summary's page first: the server remembers the receipts upstream
	// of it as verified (merge, middle, seed, ...).
	if v, _ := verdict("/runs/run-ok/nodes/summary"); v != "verified" {
		t.Fatalf("summary before the damage: %s", v)
	}
	// Damage the receipt block of middle on disk.
	st, err := boltstore.Open(f.dir, &boltstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := scheduler.LoadRecord(context.Background(), st, "run-ok")
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	var middle cid.Cid
	for _, n := range rec.Nodes {
		if n.Name == "middle" {
			middle = n.Receipt.Cid
		}
	}
	if err := boltstoretest.Corrupt(f.dir, middle, 10); err != nil {
		t.Fatal(err)
	}
	v, s := verdict("/runs/run-ok/nodes/middle")
	if !strings.HasPrefix(v, "broken: block hashes: ") || !strings.Contains(v, middle.String()) || s == "PASS" {
		t.Errorf("damaged: %s, %s", v, s)
	}
	// merge was built from middle's output: its receipt is broken too,
	// by its upstream, which its page names broken.
	v, s = verdict("/runs/run-ok/nodes/merge")
	if !strings.HasPrefix(v, "broken: upstream receipts: upstream "+middle.String()+" does not verify") || s == "PASS" {
		t.Errorf("merge, downstream of the damage: %s, %s", v, s)
	}
	if _, body := getPage(h, "/runs/run-ok/nodes/merge"); !regexp.MustCompile(`<a href="/receipts/` + middle.String() + `">.*</a> <span class="verdict v-broken" data-verdict="broken">broken: block hashes`).MatchString(body) {
		t.Errorf("merge's page does not name its upstream broken:\n%s", body)
	}
	if code, body := getPage(h, "/runs/run-ok"); code != 200 || !strings.Contains(body, "broken: block hashes") {
		t.Errorf("the run page does not mark middle broken: %d", code)
	}
	// summary, two links below middle: middle's verdict from before
	// stands (merge, which it names, is verified afresh), and the page
	// says which verdicts it did not verify again.
	if v, _ := verdict("/runs/run-ok/nodes/summary"); v != "verified" {
		t.Errorf("summary, with middle's verdict remembered: %s", v)
	}
	if _, body := getPage(h, "/runs/run-ok/nodes/summary"); !strings.Contains(body, `id="remembered">This receipt and the receipts it names were verified for this page; 2 receipts further upstream were taken as verified from this server's earlier checks`) {
		t.Errorf("summary's page does not say what it took as verified from before")
	}
	// A new server remembers nothing: summary is broken by middle.
	if code, body := getPage(f.handler(t), "/runs/run-ok/nodes/summary"); code != 200 || !strings.Contains(body, "broken: upstream receipts: upstream ") || strings.Contains(body, `id="remembered"`) {
		i := strings.Index(body, "verdictline")
		t.Errorf("summary on a new server: %d %s", code, body[i:i+2000])
	}
	// A block of the package tree every echo node runs, damaged: the
	// pages walk the tree again, and every receipt that links it breaks.
	var right cid.Cid
	for _, n := range rec.Nodes {
		if n.Name == "right" {
			right = n.Receipt.Cid
		}
	}
	if v, _ := verdict("/runs/run-ok/nodes/right"); v != "verified" {
		t.Fatalf("right before the package is damaged: %s", v)
	}
	st, err = boltstore.Open(f.dir, &boltstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := ledger.LoadReceipt(context.Background(), st, right)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := boltstoretest.Corrupt(f.dir, r.Package.Cid, 5); err != nil {
		t.Fatal(err)
	}
	if v, s := verdict("/runs/run-ok/nodes/right"); !strings.HasPrefix(v, "broken: block hashes: ") || !strings.Contains(v, r.Package.Cid.String()) || s == "PASS" {
		t.Errorf("right with its package damaged: %s, %s", v, s)
	}
	// The run's Work Order damaged on disk, after pages read it: a node
	// page reads its blocks back and fails "work order".
	if err := boltstoretest.Corrupt(f.dir, rec.WorkOrder.Cid, 10); err != nil {
		t.Fatal(err)
	}
	if v, s := verdict("/runs/run-ok/nodes/seed"); !strings.HasPrefix(v, "broken: work order: ") || s == "PASS" {
		t.Errorf("seed with its run's Work Order damaged: %s, %s", v, s)
	}
}

// TestServePagesShowHostileTextAsText: the forged step id and objective
// and the HTML file name reach the pages as text, never as markup.
func TestServePagesShowHostileTextAsText(t *testing.T) {
	f := newServeFixture(t)
	h := f.handler(t)
	code, body := getPage(h, "/runs/run-tampered/nodes/seed")
	if code != 200 {
		t.Fatalf("%d\n%s", code, body)
	}
	for _, bad := range []string{hostileStep, hostileObjective, "<img"} {
		if strings.Contains(body, bad) {
			t.Errorf("the node page holds %q as markup", bad)
		}
	}
	for _, want := range []string{`&lt;script&gt;document.title=&#34;pwned-step&#34;&lt;/script&gt;`, `&lt;img src=x onerror=&#34;document.title=&#39;pwned-objective&#39;&#34;&gt;`, "broken: "} {
		if !strings.Contains(body, want) {
			t.Errorf("the node page lacks %q", want)
		}
	}
	// PASS appears nowhere as the receipt's or a gate's verdict: the
	// receipt does not verify.
	for _, pass := range []string{`<span id="receipt-status" class="status">PASS<`, `class="gverdict">PASS<`} {
		if strings.Contains(body, pass) {
			t.Errorf("the tampered receipt's page holds %s", pass)
		}
	}
	if !strings.Contains(body, `recorded as passing, not established`) {
		t.Error("the tampered receipt's gate is not marked as not established")
	}
	for _, target := range []string{"/runs/run-release", "/beliefs/release"} {
		code, body := getPage(h, target)
		if code != 200 || strings.Contains(body, hostileNotes) || !strings.Contains(body, `&lt;script&gt;document.title=&#39;pwned-notes&#39;&lt;/script&gt;`) {
			t.Errorf("%s: %d, the decision's value not shown escaped\n%s", target, code, body)
		}
	}
	code, body = getPage(h, "/trees/"+f.tree.String()+"/")
	if code != 200 || strings.Contains(body, "<img") || !strings.Contains(body, "&lt;img src=x onerror=alert(1)&gt;.txt") {
		t.Errorf("tree: %d\n%s", code, body)
	}
}

// lockedBuffer is a buffer two goroutines may use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startServe runs 'hg serve' in this process on the store dir, with args
// after it, and returns the URL it printed; the server stops when the
// test ends, and must then exit 0.
func startServe(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	stderr := &lockedBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"--store", dir, "serve"}, args...), strings.NewReader(""), pw, stderr)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("hg serve printed no URL: %v\n%s", err, stderr.String())
	}
	go io.Copy(io.Discard, pr)
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("hg serve: exit %d\n%s", code, stderr.String())
		}
	})
	return strings.TrimSpace(line)
}

// TestServeCommand: hg serve on loopback prints its URL and serves; on
// any other address it makes a token, prints it once in the URL, and
// refuses a request without it; a bad address is a usage error, a
// missing store an error with its hint.
func TestServeCommand(t *testing.T) {
	f := newServeFixture(t)
	url := startServe(t, f.dir, "--addr", "127.0.0.1:0")
	if !regexp.MustCompile(`^http://127\.0\.0\.1:\d+/runs$`).MatchString(url) {
		t.Fatalf("printed %q", url)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "run-tampered") {
		t.Errorf("GET %s: %d", url, resp.StatusCode)
	}
	open := startServe(t, f.dir, "--addr", ":0")
	m := regexp.MustCompile(`^http://127\.0\.0\.1:(\d+)/runs\?token=([0-9a-f]{48})$`).FindStringSubmatch(open)
	if m == nil {
		t.Fatalf("printed %q", open)
	}
	bare := "http://127.0.0.1:" + m[1] + "/runs"
	if resp, err := http.Get(bare); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %v %v", resp.StatusCode, err)
	}
	req, _ := http.NewRequest(http.MethodGet, bare, nil)
	req.Header.Set("Authorization", "Bearer "+m[2])
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("bearer: %v %v", resp.StatusCode, err)
	}
	if _, errOut, code := f.hg("serve", "--addr", "8040"); code != exitUsage || !strings.Contains(errOut, "want HOST:PORT") {
		t.Errorf("--addr 8040: %d %s", code, errOut)
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--store", t.TempDir(), "serve"}, strings.NewReader(""), &stdout, &stderr); code != exitError || !strings.Contains(stderr.String(), "hg: hint: run 'hg init'") {
		t.Errorf("no store: %d %s", code, stderr.String())
	}
}

// TestServeEventsOfAFinishedRun: the live stream of a run that is not
// running gives every node's state once, as JSON, then its end; a run id
// that is none is 404, not a stream.
func TestServeEventsOfAFinishedRun(t *testing.T) {
	f := newServeFixture(t)
	h := f.handler(t)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/runs/run-halt/events", nil))
	if w.Code != 200 || w.Header().Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %q", w.Code, w.Header().Get("Content-Type"))
	}
	events := strings.Split(strings.TrimSpace(w.Body.String()), "\n\n")
	if len(events) != 2 || !strings.HasPrefix(events[0], "event: state\ndata: ") || events[1] != `event: end`+"\n"+`data: {"status":"halted"}` {
		t.Fatalf("events:\n%s", w.Body.String())
	}
	var st struct {
		Status string            `json:"status"`
		Nodes  map[string]string `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(events[0], "event: state\ndata: ")), &st); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"probe": "failed", "after-probe": "blocked", "report-probe": "blocked", "steady": "done", "steady-next": "done"}
	if st.Status != "halted" || !maps.Equal(st.Nodes, want) {
		t.Errorf("state: %+v", st)
	}
	for _, target := range []string{"/runs/run-nope/events", "/runs/..%2f/events"} {
		if code, _ := getPage(h, target); code != http.StatusNotFound {
			t.Errorf("%s: %d", target, code)
		}
	}
}

// TestServeSupersededByDownstream: a node's page verifies the receipt that
// superseded the node's before the node's own; that receipt is downstream
// of the node's, whose upstream receipts are then two links from it. The
// node's own receipt, and the receipts it names, must still be verified
// for the page: with middle damaged after the server remembered it,
// merge's page is broken, not verified.
func TestServeSupersededByDownstream(t *testing.T) {
	f := newServeFixture(t)
	if out, errOut, code := f.hg("supersede", "run-ok", "merge", "--by", "run-ok/summary", "--why", "test"); code != 0 {
		t.Fatalf("supersede: %d %s%s", code, out, errOut)
	}
	h := f.handler(t)
	verdictRE := regexp.MustCompile(`<p class="verdictline">verdict: <span [^>]*>([^<]*)</span>`)
	verdict := func(target string) string {
		t.Helper()
		code, body := getPage(h, target)
		m := verdictRE.FindStringSubmatch(body)
		if code != 200 || m == nil {
			t.Fatalf("%s: %d\n%s", target, code, body)
		}
		return m[1]
	}
	for _, node := range []string{"summary", "merge"} {
		if v := verdict("/runs/run-ok/nodes/" + node); v != "verified" {
			t.Fatalf("%s before the damage: %s", node, v)
		}
	}
	_, receipts := runRecord(t, f.dir, "run-ok")
	middle, err := cas.ParseCID(receipts["middle"])
	if err != nil {
		t.Fatal(err)
	}
	if err := boltstoretest.Corrupt(f.dir, middle, 10); err != nil {
		t.Fatal(err)
	}
	if v := verdict("/runs/run-ok/nodes/merge"); v == "verified" || !strings.Contains(v, middle.String()) {
		t.Errorf("merge with its upstream middle damaged: %s", v)
	}
}

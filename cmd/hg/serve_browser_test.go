package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// The browser tests drive a real headless Chromium (Debian's chromium
// package; .ci/run installs it) through the pages of 'hg serve'. Without
// a Chromium they skip, unless HG_REQUIRE_BROWSER=1 (make test sets it),
// when they fail. Screenshots of each page go to a directory under the
// system's temporary directory, kept and named in the log when the test
// fails (or with HG_KEEP_SCREENSHOTS=1), removed when it passes.

// findChromium returns the path of a Chromium, or "".
func findChromium() string {
	if p := os.Getenv("HG_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browserSession is one headless Chromium for a test, with the
// screenshots it took and the JavaScript dialogs any page opened.
type browserSession struct {
	t       *testing.T
	ctx     context.Context
	shots   string
	mu      sync.Mutex
	dialogs []string
}

// stepTimeout bounds each step of a browser test.
const stepTimeout = 3 * time.Minute

func newBrowser(t *testing.T) *browserSession {
	t.Helper()
	path := findChromium()
	if path == "" {
		if os.Getenv("HG_REQUIRE_BROWSER") == "1" {
			t.Fatal("HG_REQUIRE_BROWSER=1 and no chromium found: install it (apt-get install chromium), or set HG_CHROMIUM")
		}
		t.Skip("no chromium found (apt-get install chromium); HG_REQUIRE_BROWSER=1 makes this a failure")
	}
	shots, err := os.MkdirTemp("", "hg-serve-screenshots-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("HG_KEEP_SCREENSHOTS") == "1" {
			t.Logf("screenshots kept in %s", shots)
			return
		}
		os.RemoveAll(shots)
	})
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	b := &browserSession{t: t, ctx: ctx, shots: shots}
	// The first call starts the browser; it takes no timeout, which
	// would stop the browser with it.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	err = chromedp.Listen(ctx, func(ev any) {
		if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			b.mu.Lock()
			b.dialogs = append(b.dialogs, d.Message)
			b.mu.Unlock()
			go chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// do runs actions; on an error it takes a screenshot and fails.
func (b *browserSession) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		b.t.Fatalf("%s: %v", what, err)
	}
}

// value runs one action and returns its value; on an error it takes a
// screenshot and fails.
func value[T any](b *browserSession, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		b.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// js evaluates a JavaScript expression in the page.
func js[T any](b *browserSession, expr string) T {
	b.t.Helper()
	return value(b, expr, chromedp.Evaluate[T](expr))
}

// text is the text of the first element sel selects, as shown.
func (b *browserSession) text(sel string) string {
	b.t.Helper()
	return value(b, "read "+sel, chromedp.Text(chromedp.CSS(sel)))
}

// shot saves a screenshot of the whole page as NAME.png.
func (b *browserSession) shot(name string) {
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
	}
}

// fatalf takes a screenshot and fails.
func (b *browserSession) fatalf(format string, args ...any) {
	b.t.Helper()
	b.shot("failure")
	b.t.Fatalf(format, args...)
}

// TestServeInBrowser: a person opens the runs page of a store holding a
// done run, a halted run and a run with a tampered receipt, and follows
// the links: the halted node shows its HALT reason and restart point,
// verified; the tampered receipt is marked broken and does not read PASS;
// the step id holding a <script> and the objective holding an <img
// onerror> read as text, and none of them ran; a file named as HTML
// reads as its name.
func TestServeInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser")
	}
	f := newServeFixture(t)
	b := newBrowser(t)
	base := strings.TrimSuffix(startServe(t, f.dir, "--addr", "127.0.0.1:0"), "/runs")

	b.do("open the runs page", chromedp.Navigate(base+"/runs"), chromedp.WaitVisible(chromedp.CSS("#runs")))
	runsText := b.text("#runs")
	b.shot("1-runs")
	for _, r := range []string{"run-ok", "run-halt", "run-tampered"} {
		if !strings.Contains(runsText, r) {
			b.fatalf("the runs page does not list %s:\n%s", r, runsText)
		}
	}

	b.do("follow the halted run", chromedp.Click(chromedp.CSS(`#runs a[href="/runs/run-halt"]`)), chromedp.WaitVisible(chromedp.CSS("#graph svg")))
	b.shot("2-run-halt")
	probeClass := js[string](b, `document.querySelector('#graph g[data-node="probe"]').getAttribute("class")`)
	svgHref := js[string](b, `document.querySelector('#graph g[data-node="probe"]').parentNode.getAttribute("href")`)
	if !strings.Contains(probeClass, "s-failed") || svgHref != "/runs/run-halt/nodes/probe" {
		b.fatalf("the DAG's probe node: class %q, link %q", probeClass, svgHref)
	}

	b.do("follow the halted node", chromedp.Click(chromedp.CSS(`#nodes a[href="/runs/run-halt/nodes/probe"]`)), chromedp.WaitVisible(chromedp.CSS("#halt-reason")))
	b.shot("3-node-probe")
	reason, restart, verdict, status := b.text("#halt-reason"), b.text("#restart-point"), b.text(".verdictline .verdict"), b.text("#receipt-status")
	if reason != "no repair declared for gate TEST_PASS: no test_report evidence" || restart != "pretend" || verdict != "verified" || status != "HALT" {
		b.fatalf("the halted node shows reason %q, restart point %q, verdict %q, status %q", reason, restart, verdict, status)
	}

	b.do("follow the tampered run",
		chromedp.Navigate(base+"/runs"),
		chromedp.WaitVisible(chromedp.CSS("#runs")),
		chromedp.Click(chromedp.CSS(`#runs a[href="/runs/run-tampered"]`)),
		chromedp.WaitVisible(chromedp.CSS("#nodes")))
	b.shot("4-run-tampered")
	if v := b.text(`#nodes tr[data-node="seed"] .verdict`); !strings.HasPrefix(v, "broken: ") {
		b.fatalf("the tampered run's seed row reads %q", v)
	}
	b.do("follow the tampered node", chromedp.Click(chromedp.CSS(`#nodes a[href="/runs/run-tampered/nodes/seed"]`)), chromedp.WaitVisible(chromedp.CSS("#receipt")))
	b.shot("5-node-tampered")
	verdict, status = b.text(".verdictline .verdict"), b.text("#receipt-status")
	if !strings.HasPrefix(verdict, "broken: ") || status == "PASS" {
		b.fatalf("the tampered receipt: verdict %q, status %q", verdict, status)
	}
	step := js[string](b, `document.querySelector("li.transition .step").textContent`)
	objective := js[string](b, `document.querySelectorAll("#receipt dl.facts dd")[1].textContent`)
	elements := js[int](b, `document.querySelectorAll("main script, main img, main iframe").length`)
	title := value(b, "title", chromedp.Title())
	if step != hostileStep || objective != hostileObjective || elements != 0 || strings.Contains(title, "pwned") {
		b.fatalf("hostile text: step %q, objective %q, %d elements of it, title %q", step, objective, elements, title)
	}

	b.do("open a tree with an HTML file name", chromedp.Navigate(base+"/trees/"+f.tree.String()+"/"), chromedp.WaitVisible(chromedp.CSS("#tree")))
	b.shot("6-tree")
	name := js[string](b, `document.querySelector("#tree td.name").textContent`)
	elements = js[int](b, `document.querySelectorAll("main img, main script").length`)
	if name != hostileFile || elements != 0 {
		b.fatalf("the file reads %q, %d elements of it", name, elements)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.dialogs) > 0 {
		b.fatalf("pages opened dialogs: %q", b.dialogs)
	}
}

// TestServeLiveInBrowser: a person watches a run's page while 'hg run'
// executes a slow Work Order (eight one-second nodes in a chain) in
// another process: the last node's state changes to done in the table
// and the DAG without the page being loaded again, the run's status
// follows, and the live view ends with the run.
func TestServeLiveInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser while a run takes seconds")
	}
	b := newBrowser(t)
	hg := hgBinary(t)
	store := filepath.Join(t.TempDir(), "store")
	if out, err := exec.Command(hg, "--store", store, "init").CombinedOutput(); err != nil {
		t.Fatalf("init: %v %s", err, out)
	}
	base := strings.TrimSuffix(startServe(t, store, "--addr", "127.0.0.1:0"), "/runs")
	wo, _ := filepath.Abs("../../fixtures/workorders/slow-chain.json")
	cmd := exec.Command(hg, "--store", store, "run", "-j", "1", "--run-id", "run-live", wo)
	cmd.Env = append(os.Environ(), "HG_STORE=")
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	defer func() {
		if !waited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	// Wait for the run's first record, and for the run's lock, which hg
	// run takes just after it wrote that record (before, the run reads
	// as interrupted).
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(base + "/runs/run-live")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), `id="live"`) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run's page never came live: %v\n%s", err, out.String())
		}
	}
	b.do("open the running run", chromedp.Navigate(base+"/runs/run-live"), chromedp.WaitVisible(chromedp.CSS("#live")))
	first := js[string](b, `window.hgMarker = 42; document.querySelector('[data-state-of="n8"]').textContent`)
	live := b.text("#live")
	b.shot("1-running")
	if first == "done" || live != "live" {
		b.fatalf("at first n8 is %q, the live mark %q", first, live)
	}
	b.do("watch n8 become done",
		chromedp.Poll[chromedp.Void](`document.querySelector('[data-state-of="n8"]').textContent === "done"`, chromedp.WithPollingTimeout(stepTimeout)),
		chromedp.Poll[chromedp.Void](`document.getElementById("live").textContent.startsWith("ended")`, chromedp.WithPollingTimeout(time.Minute)))
	b.shot("2-done")
	marker := js[int](b, `window.hgMarker`)
	class := js[string](b, `document.querySelector('#graph g[data-node="n8"]').getAttribute("class")`)
	status := b.text("#run-status")
	if marker != 42 || !strings.Contains(class, "s-done") || status != "done" {
		b.fatalf("after the run: marker %d (42 if the page was not loaded again), n8's class %q, status %q", marker, class, status)
	}
	err := cmd.Wait()
	waited = true
	if err != nil {
		t.Fatalf("hg run: %v\n%s", err, out.String())
	}
}

package web

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/dag"
)

// openShared hands every request the same in-memory store; closing it is
// a no-op, so that the next request finds it.
type openShared struct{ cas.Store }

func (openShared) Close() error { return nil }

func testServer(t *testing.T, st cas.Store, cfg Config) *Server {
	t.Helper()
	cfg.Open = func(context.Context) (cas.Store, error) { return openShared{st}, nil }
	cfg.Trusted = func() ([]ed25519.PublicKey, error) { return nil, nil }
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func get(s http.Handler, target string, edit func(*http.Request)) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	if edit != nil {
		edit(r)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

// TestTokenRequired: with a token, a request without it, or with a wrong
// one, is refused (401) before any page is read; ?token= sets an
// HttpOnly, SameSite=Strict cookie and sends the browser to the URL
// without it; the cookie and a Bearer header then admit.
func TestTokenRequired(t *testing.T) {
	s := testServer(t, memstore.New(), Config{Token: "s3cret"})
	for name, edit := range map[string]func(*http.Request){
		"none":         nil,
		"wrong bearer": func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cre") },
		"wrong cookie": func(r *http.Request) { r.AddCookie(&http.Cookie{Name: TokenCookie, Value: "s3cret "}) },
		"basic":        func(r *http.Request) { r.SetBasicAuth("s3cret", "s3cret") },
	} {
		if w := get(s, "/runs", edit); w.Code != http.StatusUnauthorized || strings.Contains(w.Body.String(), "No runs") {
			t.Errorf("%s: %d, want 401 and no page", name, w.Code)
		}
	}
	if w := get(s, "/runs?token=nope", nil); w.Code != http.StatusUnauthorized || w.Header().Get("Set-Cookie") != "" {
		t.Errorf("wrong ?token: %d, cookie %q", w.Code, w.Header().Get("Set-Cookie"))
	}
	w := get(s, "/runs?status=done&token=s3cret", nil)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/runs?status=done" {
		t.Errorf("?token: %d to %q, want 303 to /runs?status=done", w.Code, w.Header().Get("Location"))
	}
	for target, want := range map[string]string{"//evil.example/x?token=s3cret": "/evil.example/x", "/%2F%2Fevil.example?token=s3cret&a=b": "/%2F%2Fevil.example?a=b"} {
		if w := get(s, target, nil); w.Header().Get("Location") != want {
			t.Errorf("%s: sent to %q, want %q", target, w.Header().Get("Location"), want)
		}
	}
	cookie := w.Header().Get("Set-Cookie")
	for _, want := range []string{TokenCookie + "=s3cret", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(cookie, want) {
			t.Errorf("cookie %q lacks %q", cookie, want)
		}
	}
	if w := get(s, "/runs", func(r *http.Request) { r.AddCookie(&http.Cookie{Name: TokenCookie, Value: "s3cret"}) }); w.Code != http.StatusOK {
		t.Errorf("cookie: %d", w.Code)
	}
	if w := get(s, "/runs", func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cret") }); w.Code != http.StatusOK {
		t.Errorf("bearer: %d", w.Code)
	}
}

// TestHostChecked: a server bound to loopback answers only to its own
// host names, so that a page of another site whose name was rebound to
// 127.0.0.1 cannot read it.
func TestHostChecked(t *testing.T) {
	s := testServer(t, memstore.New(), Config{Hosts: []string{"127.0.0.1:8040", "localhost:8040"}})
	for host, want := range map[string]int{"127.0.0.1:8040": 200, "LOCALHOST:8040": 200, "evil.example:8040": 421, "127.0.0.1:8041": 421, "": 421} {
		if w := get(s, "/runs", func(r *http.Request) { r.Host = host }); w.Code != want {
			t.Errorf("Host %q: %d, want %d", host, w.Code, want)
		}
	}
}

// TestHeadersAndMethods: every response, error pages and static files
// included, carries the CSP, nosniff and no framing; only GET and HEAD
// are served.
func TestHeadersAndMethods(t *testing.T) {
	s := testServer(t, memstore.New(), Config{})
	for _, target := range []string{"/runs", "/nope", "/static/style.css", "/static/live.js", "/runs/run-missing", "/receipts/notacid"} {
		w := get(s, target, nil)
		h := w.Header()
		if !strings.HasPrefix(h.Get("Content-Security-Policy"), "default-src 'self'") || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: headers %v", target, h)
		}
	}
	if w := get(s, "/static/live.js", nil); !strings.Contains(w.Header().Get("Content-Type"), "javascript") {
		t.Errorf("live.js: Content-Type %q", w.Header().Get("Content-Type"))
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		r := httptest.NewRequest(m, "/runs", strings.NewReader("x"))
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code != http.StatusMethodNotAllowed {
			t.Errorf("%s /runs: %d, want 405", m, w.Code)
		}
	}
	if w := get(s, "/runs/run-missing", nil); w.Code != http.StatusNotFound {
		t.Errorf("a missing run: %d", w.Code)
	}
}

// TestTreePathAndDownloads: a tree is walked by the names it holds, and
// nothing else: "..", an encoded slash or a name the tree lacks is 404.
// A file downloads as application/octet-stream, as an attachment whose
// name cannot break the header, whatever the file holds (here HTML).
func TestTreePathAndDownloads(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	dir := t.TempDir()
	evil := `<img src=x onerror=alert(1)>"; filename=evil.html`
	must(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "sub", evil), []byte("<html><script>alert(1)</script></html>"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "top.txt"), []byte("top"), 0o644))
	root, err := cas.PutTree(ctx, st, dir, nil)
	must(t, err)
	s := testServer(t, st, Config{})
	base := "/trees/" + root.String() + "/"
	if w := get(s, base, nil); w.Code != 200 || !strings.Contains(w.Body.String(), `href="/trees/`+root.String()+`/sub/"`) {
		t.Fatalf("root: %d\n%s", w.Code, w.Body)
	}
	w := get(s, base+"sub/", nil)
	if w.Code != 200 || strings.Contains(w.Body.String(), "<img") || !strings.Contains(w.Body.String(), "&lt;img src=x onerror=alert(1)&gt;") {
		t.Fatalf("sub: %d\n%s", w.Code, w.Body)
	}
	for _, p := range []string{"..%2f..%2f", "sub%2f..%2f..%2f", "nope/", "top.txt/", "sub/%00/", "sub/%2e%2e/"} {
		if w := get(s, base+p, nil); w.Code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, w.Code)
		}
	}
	// A path with ".." is cleaned by the router, within the tree.
	if w := get(s, base+"sub/../../", nil); w.Code/100 != 3 || w.Header().Get("Location") != "/trees/" {
		t.Errorf("sub/../../: %d to %q", w.Code, w.Header().Get("Location"))
	}
	tree, err := cas.LoadTree(ctx, st, root)
	must(t, err)
	sub, err := cas.LoadTree(ctx, st, entryNamed(tree, "sub").Link.Cid)
	must(t, err)
	file := sub.Entries[0].Link.Cid
	w = get(s, downloadHref(file, evil), nil)
	if w.Code != 200 || w.Body.String() != "<html><script>alert(1)</script></html>" {
		t.Fatalf("download: %d %q", w.Code, w.Body)
	}
	h := w.Header()
	if h.Get("Content-Type") != "application/octet-stream" || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("download headers: %v", h)
	}
	want := `attachment; filename="<img src=x onerror=alert(1)>__ filename=evil.html"; filename*=UTF-8''%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E%22%3B%20filename%3Devil.html`
	if got := h.Get("Content-Disposition"); got != want {
		t.Errorf("Content-Disposition:\n got %s\nwant %s", got, want)
	}
	// A name that is not one tree entry's (a path) is not used.
	w = get(s, "/files/"+file.String()+"?name=../../etc/passwd", nil)
	if got := w.Header().Get("Content-Disposition"); !strings.Contains(got, `filename="`+file.String()+`"`) {
		t.Errorf("a path as name: %s", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestLayoutLinear: every node is drawn once, in its wave's column;
// above boxesUpTo nodes the drawing is compact, without edges.
func TestLayout(t *testing.T) {
	for _, n := range []int{3, boxesUpTo + 1, 10000} {
		var b bytes.Buffer
		fmt.Fprintf(&b, `{"workorder": "w", "objective": "o", "nodes": {"n0": {"haygent": "h"}`)
		for i := 1; i < n; i++ {
			fmt.Fprintf(&b, `, "n%d": {"haygent": "h", "needs": ["n0"]}`, i)
		}
		b.WriteString(`}}`)
		wo, err := dag.Parse(b.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		g := layout(wo, wo.Waves(), map[string]string{"n0": "done"}, func(s string) string { return "/x/" + s })
		if len(g.Nodes) != n {
			t.Fatalf("%d nodes: %d drawn", n, len(g.Nodes))
		}
		seen := map[string]bool{}
		for _, nd := range g.Nodes {
			if seen[nd.Name] {
				t.Fatalf("%s drawn twice", nd.Name)
			}
			seen[nd.Name] = true
			if nd.X < 0 || nd.Y < 0 || nd.X > g.W || nd.Y > g.H {
				t.Fatalf("%s at %d,%d outside %dx%d", nd.Name, nd.X, nd.Y, g.W, g.H)
			}
			if want := map[bool]string{true: "done", false: "unknown"}[nd.Name == "n0"]; nd.State != want {
				t.Fatalf("%s: state %s", nd.Name, nd.State)
			}
		}
		if compact := n > boxesUpTo; g.Compact != compact || (compact && len(g.Edges) != 0) || (!compact && len(g.Edges) != n-1) {
			t.Errorf("%d nodes: compact %v, %d edges", n, g.Compact, len(g.Edges))
		}
	}
}

// The server's log escapes what a request or a ledger puts in it: a path
// holding terminal control sequences and a line of its own is one line.
func TestLogEscaped(t *testing.T) {
	var buf bytes.Buffer
	s := &Server{cfg: Config{ErrorLog: log.New(&buf, "", 0)}}
	s.logf("%s %s: %v", "GET", "/trees/\x1b]0;PWNED\a\x1b[2J\nhg: serving done", errors.New("busy"))
	out := strings.TrimSuffix(buf.String(), "\n")
	if strings.ContainsAny(out, "\x1b\a\n") || !strings.Contains(out, "hg: serving done: busy") {
		t.Fatalf("log line %q", out)
	}
}

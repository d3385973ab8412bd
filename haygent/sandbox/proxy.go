package sandbox

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/haygent/hg/haygent/sandbox/initproc"
)

// NetCheck decides whether a confined command may connect to hostport
// (HOST:PORT, the host as the command named it). rule names what decided,
// for the record of a refusal.
type NetCheck func(hostport string) (allowed bool, rule string)

// NetDenial is one connection the network proxy refused.
type NetDenial struct {
	Target string // HOST:PORT as asked
	Rule   string
}

// proxy is the only way out of a confined command's network namespace:
// an HTTP proxy on a Unix socket that the init bridges to
// 127.0.0.1:[BridgePort]. It serves CONNECT (any protocol, TLS included)
// and plain HTTP requests in absolute form, and connects only where check
// allows; it answers 403 to everything else and records it.
type proxy struct {
	dir   string
	sock  string
	l     net.Listener
	check NetCheck

	mu      sync.Mutex
	denials []NetDenial
	dropped int
	conns   map[net.Conn]bool
	wg      sync.WaitGroup
}

// dialTimeout bounds the proxy's connection to an allowed target.
const dialTimeout = 30 * time.Second

// maxHead and headTimeout bound a request head; maxConns bounds the
// connections the proxy holds at once, both directions counted.
const (
	maxHead     = 64 << 10
	headTimeout = 30 * time.Second
	maxConns    = 512
)

// newProxy listens on a new Unix socket in a private directory.
func newProxy(check NetCheck) (*proxy, error) {
	dir, err := os.MkdirTemp("", "hg-net-*")
	if err != nil {
		return nil, err
	}
	p := &proxy{dir: dir, sock: filepath.Join(dir, "proxy.sock"), check: check, conns: map[net.Conn]bool{}}
	if p.l, err = net.Listen("unix", p.sock); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p.wg.Go(p.serve)
	return p, nil
}

func (p *proxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		if !p.track(c, true) {
			c.Close()
			return
		}
		if p.open() > maxConns {
			p.track(c, false)
			c.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
			c.Close()
			continue
		}
		p.wg.Go(func() {
			defer p.track(c, false)
			defer c.Close()
			p.handle(c)
		})
	}
}

// open returns how many connections the proxy holds.
func (p *proxy) open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// track adds or removes an open connection; it refuses to add one once
// the proxy is closing.
func (p *proxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !add {
		delete(p.conns, c)
		return true
	}
	if p.conns == nil {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *proxy) handle(c net.Conn) {
	// The request head is bounded in size and time; what follows it
	// is read from c itself.
	c.SetReadDeadline(time.Now().Add(headTimeout))
	br := bufio.NewReader(io.LimitReader(c, maxHead))
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	var target string
	if req.Method == http.MethodConnect {
		target = req.Host
	} else {
		if req.URL.Scheme != "http" || req.URL.Host == "" {
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
			return
		}
		target = req.URL.Host
		if req.URL.Port() == "" {
			target = net.JoinHostPort(req.URL.Hostname(), "80")
		}
	}
	host, port, err := net.SplitHostPort(target)
	if err != nil || host == "" || port == "" {
		p.refuse(c, target, "not HOST:PORT")
		return
	}
	target = net.JoinHostPort(strings.ToLower(host), port)
	if ok, rule := p.check(target); !ok {
		p.refuse(c, target, rule)
		return
	}
	up, err := net.DialTimeout("tcp", target, dialTimeout)
	if err != nil {
		c.Write([]byte("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
		return
	}
	defer up.Close()
	if !p.track(up, true) {
		return
	}
	defer p.track(up, false)
	if req.Method == http.MethodConnect {
		if _, err := c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
			return
		}
	} else {
		req.RequestURI = ""
		req.Header.Del("Proxy-Connection")
		req.Header.Del("Proxy-Authorization")
		req.Close = true
		if err := req.Write(up); err != nil {
			return
		}
	}
	// What the client sent past the request head goes on too.
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
	}
	initproc.Join(c, up)
}

// MaxNetDenials is how many refused connections a run lists; the rest are
// counted. MaxNetTarget is the longest target listed, in bytes.
const (
	MaxNetDenials = 64
	MaxNetTarget  = 260
)

func (p *proxy) refuse(c net.Conn, target, rule string) {
	if len(target) > MaxNetTarget {
		target = strings.ToValidUTF8(target[:MaxNetTarget], "") + "..."
	}
	target = strings.ToValidUTF8(target, "\uFFFD")
	p.mu.Lock()
	if len(p.denials) < MaxNetDenials {
		p.denials = append(p.denials, NetDenial{Target: target, Rule: rule})
	} else {
		p.dropped++
	}
	p.mu.Unlock()
	c.Write([]byte("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
}

// close stops the proxy, ends the connections it holds, and returns the
// refusals it recorded and how many more it counted.
func (p *proxy) close() ([]NetDenial, int) {
	p.l.Close()
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	p.wg.Wait()
	os.RemoveAll(p.dir)
	return p.denials, p.dropped
}

package sandbox

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// A hostile step talking to its proxy directly: an endless request head is
// cut at the limit, a target without a port and a request not in absolute
// form are refused, and nothing is dialled.
func TestProxyHostileRequests(t *testing.T) {
	dialled := 0
	p, err := newProxy(func(string) (bool, string) { dialled++; return false, "no grant" })
	if err != nil {
		t.Fatal(err)
	}
	ask := func(head string) string {
		t.Helper()
		c, err := net.Dial("unix", p.sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		go io.WriteString(c, head)
		line, _ := bufio.NewReader(c).ReadString('\n')
		return line
	}
	if got := ask("CONNECT example.com:443 HTTP/1.1\r\nX: " + strings.Repeat("a", 1<<20)); got != "" {
		t.Errorf("an endless head got %q, want the connection closed", got)
	}
	if got := ask("CONNECT example.com HTTP/1.1\r\nHost: example.com\r\n\r\n"); !strings.Contains(got, " 403 ") {
		t.Errorf("a target without a port got %q, want 403", got)
	}
	if got := ask("GET /x HTTP/1.1\r\nHost: example.com\r\n\r\n"); !strings.Contains(got, " 400 ") {
		t.Errorf("a request not in absolute form got %q, want 400", got)
	}
	if got := ask("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n"); !strings.Contains(got, " 403 ") {
		t.Errorf("an ungranted plain request got %q, want 403", got)
	}
	denials, _ := p.close()
	if dialled != 1 || len(denials) != 2 || denials[1].Target != "example.com:80" {
		t.Errorf("checked %d, denials %+v", dialled, denials)
	}
}

// A flood of refused connections with long names is recorded bounded: at
// most MaxNetDenials listed, each target at most MaxNetTarget bytes and
// valid UTF-8, and the rest counted.
func TestProxyDenialsBounded(t *testing.T) {
	p, err := newProxy(func(string) (bool, string) { return false, "no grant" })
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("\xffa", 30000)
	for i := range MaxNetDenials + 6 {
		c, err := net.Dial("unix", p.sock)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "CONNECT "+long+strings.Repeat("b", i)+":443 HTTP/1.1\r\n\r\n")
		bufio.NewReader(c).ReadString('\n')
		c.Close()
	}
	denials, dropped := p.close()
	if len(denials) != MaxNetDenials || dropped != 6 {
		t.Fatalf("%d listed, %d dropped; want %d and 6", len(denials), dropped, MaxNetDenials)
	}
	for _, d := range denials {
		if len(d.Target) > MaxNetTarget+3 || !utf8.ValidString(d.Target) {
			t.Fatalf("target of %d bytes, valid UTF-8 %v", len(d.Target), utf8.ValidString(d.Target))
		}
	}
}

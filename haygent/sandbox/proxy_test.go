package sandbox

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
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
	denials := p.close()
	if dialled != 1 || len(denials) != 2 || denials[1].Target != "example.com:80" {
		t.Errorf("checked %d, denials %+v", dialled, denials)
	}
}

package initproc

import (
	"io"
	"net"
	"sync"
)

// Join copies a to b and b to a until both directions end, passing each
// end of stream on as a half close.
func Join(a, b net.Conn) {
	var wg sync.WaitGroup
	half := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	wg.Go(func() { half(a, b) })
	wg.Go(func() { half(b, a) })
	wg.Wait()
}

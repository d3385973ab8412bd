package unixfs_test

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/haygent/hg/cas/boltstore"
	"github.com/haygent/hg/cas/unixfs"
)

// BenchmarkReadFile reads a 64 MiB file laid out as kubo lays one out by
// default (256 KiB raw leaves, 174 links a node) from an on-disk store,
// every block verified against its hash.
func BenchmarkReadFile(b *testing.B) {
	const leafSize, width, leaves = 256 << 10, 174, 256
	dir := filepath.Join(b.TempDir(), "store")
	if err := boltstore.Init(dir); err != nil {
		b.Fatal(err)
	}
	st, err := boltstore.Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	d := &dag{t: b, st: st}
	var kids []sized
	var parents []sized
	for i := range leaves {
		buf := make([]byte, leafSize)
		for j := range buf {
			buf[j] = byte(i*7 + j)
		}
		kids = append(kids, sized{d.put(0x55, buf), leafSize})
		if len(kids) == width || i == leaves-1 {
			var sum uint64
			for _, k := range kids {
				sum += k.size
			}
			parents = append(parents, sized{d.file("", kids...), sum})
			kids = nil
		}
	}
	root := d.file("", parents...)
	b.SetBytes(leafSize * leaves)
	b.ResetTimer()
	for range b.N {
		n, err := unixfs.ReadFile(context.Background(), d.st, root, io.Discard, nil)
		if err != nil || n != leafSize*leaves {
			b.Fatal(n, err)
		}
	}
}

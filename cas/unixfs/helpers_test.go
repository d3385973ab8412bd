package unixfs_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/cas/unixfs"
	"github.com/ipfs/go-cid"
	"github.com/spaolacci/murmur3"
)

// loadCAR puts every block of testdata/NAME into a new memory store,
// without the closure check an import makes (so a CAR missing a block
// loads), and returns the store and the CAR's roots.
func loadCAR(t testing.TB, name string) (*memstore.Store, []cid.Cid) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cr, err := cas.NewCARReader(f)
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	for {
		s, err := cr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := cas.NewBlockWithCID(s.CID, s.Data)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	return st, cr.Roots()
}

// dag builds UnixFS DAGs by hand, hostile ones included.
type dag struct {
	t  testing.TB
	st cas.Store
}

func newDAG(t testing.TB) *dag { return &dag{t: t, st: memstore.New()} }

func (d *dag) put(codec uint64, data []byte) cid.Cid {
	d.t.Helper()
	b := cas.NewBlock(codec, data)
	if err := d.st.Put(context.Background(), b); err != nil {
		d.t.Fatal(err)
	}
	return b.CID()
}

// node stores a dag-pb node with the given UnixFS data and links.
func (d *dag) node(fs *unixfs.Data, links ...unixfs.PBLink) cid.Cid {
	d.t.Helper()
	n := unixfs.PBNode{Links: links, Data: fs.Encode(), HasData: true}
	return d.put(cas.DagPB, n.Encode())
}

func (d *dag) raw(s string) cid.Cid { return d.put(cas.Raw, []byte(s)) }

// file stores a File node with inline data and the children given, each
// declared to hold the size given.
func (d *dag) file(data string, children ...sized) cid.Cid {
	fs := &unixfs.Data{Type: unixfs.TypeFile, Data: []byte(data)}
	var links []unixfs.PBLink
	total := uint64(len(data))
	for _, c := range children {
		fs.Blocksizes = append(fs.Blocksizes, c.size)
		links = append(links, unixfs.PBLink{Hash: c.c, HasName: true, HasTsize: true, Tsize: c.size})
		total += c.size
	}
	fs.Filesize, fs.HasFilesize = total, true
	return d.node(fs, links...)
}

type sized struct {
	c    cid.Cid
	size uint64
}

// dir stores a plain directory of the entries given, in that order.
func (d *dag) dir(ents ...unixfs.Entry) cid.Cid {
	var links []unixfs.PBLink
	for _, e := range ents {
		links = append(links, unixfs.PBLink{Hash: e.CID, Name: e.Name, HasName: true, Tsize: e.Tsize, HasTsize: true})
	}
	return d.node(&unixfs.Data{Type: unixfs.TypeDirectory}, links...)
}

func (d *dag) symlink(target string) cid.Cid {
	return d.node(&unixfs.Data{Type: unixfs.TypeSymlink, Data: []byte(target)})
}

func ent(name string, c cid.Cid) unixfs.Entry { return unixfs.Entry{Name: name, CID: c} }

func mustCID(t testing.TB, s string) cid.Cid {
	t.Helper()
	c, err := cas.ParseCID(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// hamtEnt is an entry of a HAMT shard built by hand.
type hamtEnt struct {
	name string
	c    cid.Cid
}

// hamt stores a one-level HAMT shard of the given fanout holding ents,
// each in the bucket its murmur3 hash selects, as kubo lays them out
// (the kubo fixture in fixtures_test.go checks the layout).
func (d *dag) hamt(fanout uint64, ents ...hamtEnt) cid.Cid {
	return d.hamtShard(fanout, 0, ents...)
}

// hamtLevel stores a shard of fanout 256 meant to sit depth levels below
// the root: its entries' buckets are taken from that level's bits.
func (d *dag) hamtLevel(depth int, ents ...hamtEnt) cid.Cid {
	return d.hamtShard(256, depth, ents...)
}

func (d *dag) hamtShard(fanout uint64, depth int, ents ...hamtEnt) cid.Cid {
	width := bits.TrailingZeros64(fanout)
	pad := len(fmt.Sprintf("%X", fanout-1))
	type placed struct {
		bucket uint64
		e      hamtEnt
	}
	var ps []placed
	for _, e := range ents {
		h := murmur3.New64()
		h.Write([]byte(e.name))
		ps = append(ps, placed{(h.Sum64() >> (64 - (depth+1)*width)) & (1<<width - 1), e})
	}
	slices.SortStableFunc(ps, func(a, b placed) int { return cmp.Compare(a.bucket, b.bucket) })
	field := make([]byte, (fanout+7)/8)
	var links []unixfs.PBLink
	for _, p := range ps {
		field[len(field)-1-int(p.bucket/8)] |= 1 << (p.bucket % 8)
		links = append(links, unixfs.PBLink{Hash: p.e.c, Name: fmt.Sprintf("%0*X", pad, p.bucket) + p.e.name, HasName: true})
	}
	return d.node(&unixfs.Data{Type: unixfs.TypeHAMTShard, Data: field, HashType: 0x22, HasHashType: true, Fanout: fanout, HasFanout: true}, links...)
}

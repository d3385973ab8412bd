package unixfs_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/unixfs"
	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/encoding/protowire"
)

// pbField appends a length-delimited field.
func pbField(b []byte, num protowire.Number, body []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, body)
}

func testCID() cid.Cid { return cas.Sum(cas.Raw, []byte("x")) }

// The dag-pb decoder keeps to the specification's strict form: every
// departure from it is refused, and what it accepts encodes back.
func TestDecodePBNodeStrict(t *testing.T) {
	hash := testCID().Bytes()
	link := func(fields ...[]byte) []byte { return bytes.Join(fields, nil) }
	fHash := pbField(nil, 1, hash)
	fName := pbField(nil, 2, []byte("n"))
	fTsize := protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), 7)
	okLink := pbField(nil, 2, link(fHash, fName, fTsize))
	data := pbField(nil, 1, []byte{8, 1})
	for _, tt := range []struct {
		name string
		in   []byte
		ok   bool
	}{
		{"empty block", nil, true},
		{"links then data", link(okLink, okLink, data), true},
		{"data then links", link(data, okLink, okLink), true},
		{"link of Hash alone", pbField(nil, 2, fHash), true},
		{"links around data", link(okLink, data, okLink), false},
		{"data twice", link(data, data), false},
		{"unknown node field", link(pbField(nil, 3, nil)), false},
		{"node field of varint type", protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1), false},
		{"link without Hash", pbField(nil, 2, fName), false},
		{"link fields out of order", pbField(nil, 2, link(fName, fHash)), false},
		{"link Hash twice", pbField(nil, 2, link(fHash, fHash)), false},
		{"link unknown field", pbField(nil, 2, link(fHash, pbField(nil, 4, nil))), false},
		{"link Tsize as bytes", pbField(nil, 2, link(fHash, pbField(nil, 3, []byte{1}))), false},
		{"Hash not a CID", pbField(nil, 2, pbField(nil, 1, []byte{1, 2, 3})), false},
		{"Name not UTF-8", pbField(nil, 2, link(fHash, pbField(nil, 2, []byte{0xff}))), false},
		{"overlong tag varint", link([]byte{0x0a | 0x80, 0x00, 0}), false},
		{"overlong length varint", link([]byte{0x0a, 0x80, 0x00}), false},
		{"overlong Tsize", pbField(nil, 2, link(fHash, []byte{0x18, 0x87, 0x00})), false},
		{"truncated", okLink[:len(okLink)-1], false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, err := unixfs.DecodePBNode(tt.in)
			if tt.ok != (err == nil) {
				t.Fatalf("DecodePBNode(%x) = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if err != nil && !errors.Is(err, unixfs.ErrMalformed) {
				t.Errorf("error %v does not wrap ErrMalformed", err)
			}
			if err == nil && !bytes.HasPrefix(tt.in, data) && !bytes.Equal(n.Encode(), tt.in) {
				t.Errorf("Encode = %x, want the input %x", n.Encode(), tt.in)
			}
		})
	}
}

// The zero-length block is a valid dag-pb node with no Data, whose CID
// the specification gives, and which is not a UnixFS node.
func TestZeroLengthBlock(t *testing.T) {
	if c := cas.Sum(cas.DagPB, nil); c.String() != "bafybeihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku" {
		t.Fatalf("CID %s, not the specification's", c)
	}
	n, err := unixfs.DecodePBNode(nil)
	if err != nil || n.HasData || len(n.Links) != 0 {
		t.Fatalf("DecodePBNode(nil) = %+v, %v", n, err)
	}
	out, err := cas.EncodeJSON(n.Value())
	if err != nil || string(out) != `{"Links":[]}` {
		t.Errorf("DAG-JSON %s, %v", out, err)
	}
	d := newDAG(t)
	c := d.put(cas.DagPB, nil)
	if _, err := unixfs.Load(context.Background(), d.st, c); !errors.Is(err, unixfs.ErrNotUnixFS) {
		t.Errorf("Load of the empty node = %v, want ErrNotUnixFS", err)
	}
}

func TestDecodeData(t *testing.T) {
	tag := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
	}
	cat := func(b ...[]byte) []byte { return bytes.Join(b, nil) }
	packed := pbField(nil, 4, cat(protowire.AppendVarint(nil, 300), protowire.AppendVarint(nil, 5)))
	for _, tt := range []struct {
		name string
		in   []byte
		ok   bool
	}{
		{"file", cat(tag(1, 2), pbField(nil, 2, []byte("hi")), tag(3, 2)), true},
		{"blocksizes unpacked", cat(tag(1, 2), tag(3, 305), tag(4, 300), tag(4, 5)), true},
		{"blocksizes packed", cat(tag(1, 2), tag(3, 305), packed), true},
		{"mode and mtime", cat(tag(1, 2), tag(7, 0o644), pbField(nil, 8, cat(tag(1, 1700000000)))), true},
		{"no type", cat(pbField(nil, 2, []byte("hi"))), false},
		{"unknown type", tag(1, 6), false},
		{"type twice", cat(tag(1, 2), tag(1, 2)), false},
		{"unknown field", cat(tag(1, 2), tag(9, 1)), false},
		{"data as varint", cat(tag(1, 2), tag(2, 1)), false},
		{"mtime without seconds", cat(tag(1, 2), pbField(nil, 8, nil)), false},
		{"mode over 32 bits", cat(tag(1, 2), tag(7, 1<<33)), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, err := unixfs.DecodeData(tt.in)
			if tt.ok != (err == nil) {
				t.Fatalf("DecodeData(%x) = %+v, %v; want ok=%v", tt.in, d, err, tt.ok)
			}
		})
	}
}

// HAMT shards that break the layout kubo reads by are refused: an entry
// in a bucket its hash does not select (kubo's lookup would never find
// it), links and bitfield that disagree, another hash function.
func TestHostileHAMT(t *testing.T) {
	ctx := context.Background()
	entries := func(d *dag, c cid.Cid) error {
		n, err := unixfs.Load(ctx, d.st, c)
		if err != nil {
			return err
		}
		_, err = unixfs.Entries(ctx, d.st, n)
		return err
	}
	t.Run("honest", func(t *testing.T) {
		d := newDAG(t)
		f := d.raw("x")
		root := d.hamt(256, hamtEnt{"a", f}, hamtEnt{"b", f}, hamtEnt{"c", f})
		if err := entries(d, root); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("wrong bucket", func(t *testing.T) {
		d := newDAG(t)
		f := d.raw("x")
		good := d.hamt(256, hamtEnt{"a", f})
		// Rename the one link to another bucket, keeping the bitfield.
		blk, _ := d.st.Get(ctx, good)
		pb, _ := unixfs.DecodePBNode(blk)
		fs, _ := unixfs.DecodeData(pb.Data)
		bucket := pb.Links[0].Name[:2]
		other := "00"
		if bucket == "00" {
			other = "01"
		}
		fs.Data = make([]byte, 32)
		fs.Data[31] = 1
		if other == "01" {
			fs.Data[31] = 2
		}
		pb.Links[0].Name = other + "a"
		bad := d.node(fs, pb.Links...)
		if err := entries(d, bad); !errors.Is(err, cas.ErrInvalid) || !strings.Contains(err.Error(), "hash puts it") {
			t.Fatalf("Entries = %v, want a misplaced entry", err)
		}
	})
	t.Run("bitfield disagrees", func(t *testing.T) {
		d := newDAG(t)
		f := d.raw("x")
		fs := &unixfs.Data{Type: unixfs.TypeHAMTShard, Data: []byte{3}, HashType: 0x22, HasHashType: true, Fanout: 256, HasFanout: true}
		bad := d.node(fs, unixfs.PBLink{Hash: f, Name: "00a", HasName: true})
		if err := entries(d, bad); !errors.Is(err, cas.ErrInvalid) {
			t.Fatalf("Entries = %v, want invalid", err)
		}
	})
	t.Run("bits beyond the fanout", func(t *testing.T) {
		// Fanout 2 takes one byte of bitfield, whose bits 2 to 7 name no
		// bucket: set, they must not count as links.
		d := newDAG(t)
		f := d.raw("x")
		fs := &unixfs.Data{Type: unixfs.TypeHAMTShard, Data: []byte{0b00100001}, HashType: 0x22, HasHashType: true, Fanout: 2, HasFanout: true}
		bad := d.node(fs, unixfs.PBLink{Hash: f, Name: "0a", HasName: true}, unixfs.PBLink{Hash: f, Name: "5b", HasName: true})
		if err := entries(d, bad); !errors.Is(err, cas.ErrInvalid) {
			t.Fatalf("Entries = %v, want invalid", err)
		}
	})
	t.Run("other hash", func(t *testing.T) {
		d := newDAG(t)
		fs := &unixfs.Data{Type: unixfs.TypeHAMTShard, HashType: 0x12, HasHashType: true, Fanout: 256, HasFanout: true}
		if err := entries(d, d.node(fs)); !errors.Is(err, unixfs.ErrUnsupported) {
			t.Fatalf("Entries = %v, want unsupported", err)
		}
	})
	t.Run("fanout not a power of two", func(t *testing.T) {
		d := newDAG(t)
		fs := &unixfs.Data{Type: unixfs.TypeHAMTShard, HashType: 0x22, HasHashType: true, Fanout: 100, HasFanout: true}
		if err := entries(d, d.node(fs)); !errors.Is(err, cas.ErrInvalid) {
			t.Fatalf("Entries = %v, want invalid", err)
		}
	})
}

func FuzzDecodePBNode(f *testing.F) {
	for _, name := range []string{"dir-with-files.car", "single-layer-hamt-with-multi-block-files.car", "issue-54.car", "symlink.car"} {
		st, _ := loadCAR(f, name)
		_ = st.AllKeys(context.Background(), func(c cid.Cid, _ int) error {
			if c.Type() == cas.DagPB {
				b, _ := st.Get(context.Background(), c)
				f.Add(b)
			}
			return nil
		})
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := unixfs.DecodePBNode(data)
		if err != nil {
			return
		}
		// The links-first form encodes back byte for byte; a data-first
		// block re-encodes to the same node.
		enc := n.Encode()
		m, err := unixfs.DecodePBNode(enc)
		if err != nil {
			t.Fatalf("re-encoding %x does not decode: %v", enc, err)
		}
		if !bytes.Equal(m.Encode(), enc) {
			t.Fatalf("not stable: %x then %x", enc, m.Encode())
		}
		if len(n.Links) == 0 || !n.HasData || !bytes.HasPrefix(data, []byte{0x0a}) {
			if !bytes.Equal(enc, data) {
				t.Fatalf("accepted %x but encodes it as %x", data, enc)
			}
		}
		if _, err := cas.EncodeJSON(n.Value()); err != nil {
			t.Fatalf("DAG-JSON of an accepted node: %v", err)
		}
		if d, err := unixfs.DecodeData(n.Data); err == nil && d.Type > unixfs.TypeHAMTShard {
			t.Fatalf("type %d accepted", d.Type)
		}
	})
}

func FuzzDecodeData(f *testing.F) {
	for _, s := range []string{"0802", "08021202686918022002", "080518002a0100280130ff01"} {
		b, _ := hex.DecodeString(s)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := unixfs.DecodeData(data)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to a message that decodes to the
		// same values.
		e, err := unixfs.DecodeData(d.Encode())
		if err != nil {
			t.Fatalf("re-encoding does not decode: %v", err)
		}
		if e.Type != d.Type || !bytes.Equal(e.Data, d.Data) || e.Filesize != d.Filesize || len(e.Blocksizes) != len(d.Blocksizes) || e.Mode != d.Mode || e.MtimeSecs != d.MtimeSecs {
			t.Fatalf("round trip changed %+v into %+v", d, e)
		}
	})
}

// FuzzNode reads any bytes as a UnixFS node and walks what it can:
// whatever the block says, the reader returns an error or a result, and
// never panics or writes more than the block declares.
func FuzzNode(f *testing.F) {
	for _, name := range []string{"dir-with-files.car", "single-layer-hamt-with-multi-block-files.car", "symlink.car"} {
		st, _ := loadCAR(f, name)
		_ = st.AllKeys(context.Background(), func(c cid.Cid, _ int) error {
			if c.Type() == cas.DagPB {
				b, _ := st.Get(context.Background(), c)
				f.Add(b)
			}
			return nil
		})
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		d := newDAG(t)
		c := d.put(cas.DagPB, data)
		n, err := unixfs.Load(ctx, d.st, c)
		if err != nil {
			return
		}
		switch {
		case n.IsDir():
			_, _ = unixfs.Entries(ctx, d.st, n)
			_, _ = unixfs.Lookup(ctx, d.st, n, "a")
		case n.IsFile():
			var buf bytes.Buffer
			k, err := unixfs.ReadFile(ctx, d.st, c, &buf, nil)
			if err == nil && uint64(k) != n.FileSize() {
				t.Fatalf("read %d bytes of a file of %d", k, n.FileSize())
			}
		}
		_, _ = unixfs.Stat(ctx, d.st, c)
	})
}

package unixfs

import (
	"fmt"

	"github.com/haygent/hg/cas"
	"google.golang.org/protobuf/encoding/protowire"
)

// DataType is the kind of a UnixFS node.
type DataType uint64

// The UnixFS node types.
const (
	TypeRaw       DataType = 0
	TypeDirectory DataType = 1
	TypeFile      DataType = 2
	TypeMetadata  DataType = 3
	TypeSymlink   DataType = 4
	TypeHAMTShard DataType = 5
)

func (t DataType) String() string {
	switch t {
	case TypeRaw:
		return "raw"
	case TypeDirectory:
		return "directory"
	case TypeFile:
		return "file"
	case TypeMetadata:
		return "metadata"
	case TypeSymlink:
		return "symlink"
	case TypeHAMTShard:
		return "hamt-shard"
	}
	return fmt.Sprintf("type %d", uint64(t))
}

// Data is the UnixFS message a dag-pb node carries in its Data field.
// Mode and Mtime are read and checked but hg does not apply them.
type Data struct {
	Type        DataType
	Data        []byte
	Filesize    uint64
	HasFilesize bool
	Blocksizes  []uint64
	HashType    uint64
	HasHashType bool
	Fanout      uint64
	HasFanout   bool
	Mode        uint32
	HasMode     bool
	MtimeSecs   int64
	MtimeNanos  uint32
	HasMtime    bool
}

// Protobuf field numbers of the UnixFS Data message.
const (
	fType       = 1
	fData       = 2
	fFilesize   = 3
	fBlocksizes = 4
	fHashType   = 5
	fFanout     = 6
	fMode       = 7
	fMtime      = 8
)

// DecodeData decodes a UnixFS Data message. It refuses unknown fields,
// wrong wire types, a field other than blocksizes given twice, a missing
// or unknown Type, and varints not in their shortest form. blocksizes may
// be packed or not, as protobuf allows. Errors wrap [cas.ErrInvalid].
func DecodeData(b []byte) (*Data, error) {
	d := &Data{}
	seen := map[protowire.Number]bool{}
	for off := 0; off < len(b); {
		num, typ, tl := protowire.ConsumeTag(b[off:])
		if tl < 0 {
			return nil, dataErr("bad field tag at byte %d", off)
		}
		if err := shortest(b[off:], tl); err != nil {
			return nil, dataErr("field tag at byte %d: %v", off, err)
		}
		if seen[num] && num != fBlocksizes {
			return nil, dataErr("field %d appears twice", num)
		}
		seen[num] = true
		rest := b[off+tl:]
		var n int
		switch {
		case typ == protowire.VarintType && num != fData && num != fMtime:
			var v uint64
			if v, n = protowire.ConsumeVarint(rest); n < 0 || n != protowire.SizeVarint(v) {
				return nil, dataErr("field %d: bad varint", num)
			}
			switch num {
			case fType:
				if v > uint64(TypeHAMTShard) {
					return nil, dataErr("unknown type %d", v)
				}
				d.Type = DataType(v)
			case fFilesize:
				d.Filesize, d.HasFilesize = v, true
			case fBlocksizes:
				d.Blocksizes = append(d.Blocksizes, v)
			case fHashType:
				d.HashType, d.HasHashType = v, true
			case fFanout:
				d.Fanout, d.HasFanout = v, true
			case fMode:
				if v > 0xffffffff {
					return nil, dataErr("mode %d over 32 bits", v)
				}
				d.Mode, d.HasMode = uint32(v), true
			default:
				return nil, dataErr("unknown field %d", num)
			}
		case typ == protowire.BytesType && (num == fData || num == fBlocksizes || num == fMtime):
			var body []byte
			if body, n = protowire.ConsumeBytes(rest); n < 0 {
				return nil, dataErr("field %d: bad length", num)
			}
			if n-len(body) != protowire.SizeVarint(uint64(len(body))) {
				return nil, dataErr("field %d: length varint not in its shortest form", num)
			}
			switch num {
			case fData:
				d.Data = body
			case fBlocksizes: // packed
				for len(body) > 0 {
					v, m := protowire.ConsumeVarint(body)
					if m < 0 || m != protowire.SizeVarint(v) {
						return nil, dataErr("blocksizes: bad varint")
					}
					d.Blocksizes = append(d.Blocksizes, v)
					body = body[m:]
				}
			case fMtime:
				if err := d.decodeMtime(body); err != nil {
					return nil, err
				}
			}
		default:
			return nil, dataErr("unknown field %d of wire type %d", num, typ)
		}
		off += tl + n
	}
	if !seen[fType] {
		return nil, dataErr("no Type")
	}
	return d, nil
}

// decodeMtime reads a UnixTime: Seconds (int64, required) and
// FractionalNanoseconds (fixed32, optional, under a second).
func (d *Data) decodeMtime(b []byte) error {
	haveSecs, haveNanos := false, false
	for off := 0; off < len(b); {
		num, typ, tl := protowire.ConsumeTag(b[off:])
		if tl < 0 {
			return dataErr("mtime: bad field tag")
		}
		var n int
		switch {
		case num == 1 && typ == protowire.VarintType && !haveSecs && !haveNanos:
			var v uint64
			if v, n = protowire.ConsumeVarint(b[off+tl:]); n < 0 || n != protowire.SizeVarint(v) {
				return dataErr("mtime: bad Seconds")
			}
			d.MtimeSecs, haveSecs = int64(v), true
		case num == 2 && typ == protowire.Fixed32Type && !haveNanos:
			var v uint32
			if v, n = protowire.ConsumeFixed32(b[off+tl:]); n < 0 || v == 0 || v > 999999999 {
				return dataErr("mtime: bad FractionalNanoseconds")
			}
			d.MtimeNanos, haveNanos = v, true
		default:
			return dataErr("mtime: unexpected field %d of wire type %d", num, typ)
		}
		off += tl + n
	}
	if !haveSecs {
		return dataErr("mtime without Seconds")
	}
	d.HasMtime = true
	return nil
}

func dataErr(format string, args ...any) error {
	return fmt.Errorf("unixfs data: %s: %w", fmt.Sprintf(format, args...), cas.ErrInvalid)
}

// Encode returns d as a UnixFS Data message, fields in number order and
// blocksizes unpacked, as kubo writes it. hg writes no UnixFS; Encode is
// for tests.
func (d *Data) Encode() []byte {
	var b []byte
	b = protowire.AppendTag(b, fType, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(d.Type))
	if d.Data != nil {
		b = protowire.AppendTag(b, fData, protowire.BytesType)
		b = protowire.AppendBytes(b, d.Data)
	}
	if d.HasFilesize {
		b = protowire.AppendTag(b, fFilesize, protowire.VarintType)
		b = protowire.AppendVarint(b, d.Filesize)
	}
	for _, s := range d.Blocksizes {
		b = protowire.AppendTag(b, fBlocksizes, protowire.VarintType)
		b = protowire.AppendVarint(b, s)
	}
	if d.HasHashType {
		b = protowire.AppendTag(b, fHashType, protowire.VarintType)
		b = protowire.AppendVarint(b, d.HashType)
	}
	if d.HasFanout {
		b = protowire.AppendTag(b, fFanout, protowire.VarintType)
		b = protowire.AppendVarint(b, d.Fanout)
	}
	if d.HasMode {
		b = protowire.AppendTag(b, fMode, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(d.Mode))
	}
	if d.HasMtime {
		var m []byte
		m = protowire.AppendTag(m, 1, protowire.VarintType)
		m = protowire.AppendVarint(m, uint64(d.MtimeSecs))
		if d.MtimeNanos != 0 {
			m = protowire.AppendTag(m, 2, protowire.Fixed32Type)
			m = protowire.AppendFixed32(m, d.MtimeNanos)
		}
		b = protowire.AppendTag(b, fMtime, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	return b
}

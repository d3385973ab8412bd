package cas

import (
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"reflect"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"
)

// planDecoder decodes data a plan has checked (see canon.go) into a value
// of the plan's type, in one pass and without the general decoder's
// bookkeeping: the check has already refused every malformed or
// non-canonical item, so what is left to refuse here is only what the
// plan cannot see from the bytes' shape: invalid UTF-8, an integer out of
// its field's range, an invalid CID. The values are those the general
// decoder gives (decMode): int64, or *big.Int beyond it, for integers in
// fields of type any, float64, []byte, string, []any, map[string]any,
// cbor.Tag for links there, and empty, not nil, slices and maps.
type planDecoder struct {
	data    []byte
	pos     int
	links   func(raw []byte) (cid.Cid, bool) // see Decoder.Links; may be nil
	collect bool                             // gather the links decoded into found
	found   []cid.Cid
}

var errBadUTF8 = errors.New("invalid UTF-8 in a text string")

// head reads a head the check has found well formed and shortest.
func (d *planDecoder) head() (major byte, arg uint64) {
	major, n, arg, _ := readHead(d.data[d.pos:])
	d.pos += n
	return major, arg
}

func (d *planDecoder) bytes(n uint64) []byte {
	b := d.data[d.pos : d.pos+int(n)]
	d.pos += int(n)
	return b
}

func (d *planDecoder) text(n uint64) (string, error) {
	b := d.bytes(n)
	if !utf8.Valid(b) {
		return "", errBadUTF8
	}
	return string(b), nil
}

func (d *planDecoder) value(p *typePlan, v reflect.Value) error {
	switch p.kind {
	case planAny:
		x, err := d.generic()
		if err != nil {
			return err
		}
		if x != nil {
			v.Set(reflect.ValueOf(x))
		}
		return nil
	case planPointer:
		if d.data[d.pos] == 0xf6 {
			d.pos++
			return nil
		}
		e := reflect.New(p.elem.typ)
		if err := d.value(p.elem, e.Elem()); err != nil {
			return err
		}
		v.Set(e)
		return nil
	case planLink:
		return d.link(v.Addr().Interface().(*Link))
	}
	major, arg := d.head()
	switch p.kind {
	case planText:
		s, err := d.text(arg)
		if err != nil {
			return err
		}
		v.SetString(s)
	case planInt:
		return d.integer(major, arg, v)
	case planBool:
		v.SetBool(arg == 21)
	case planBytes:
		v.SetBytes(append(make([]byte, 0, arg), d.bytes(arg)...))
	case planArray:
		s := reflect.MakeSlice(p.typ, int(arg), int(arg))
		for i := range int(arg) {
			if err := d.value(p.elem, s.Index(i)); err != nil {
				return err
			}
		}
		v.Set(s)
	case planMap:
		if p.elem.kind == planAny && p.typ == mapAnyType {
			m, err := d.mapAny(arg)
			if err != nil {
				return err
			}
			v.Set(reflect.ValueOf(m))
			return nil
		}
		m := reflect.MakeMapWithSize(p.typ, int(arg))
		for range arg {
			_, n := d.head()
			key, err := d.text(n)
			if err != nil {
				return err
			}
			e := reflect.New(p.elem.typ).Elem()
			if err := d.value(p.elem, e); err != nil {
				return err
			}
			m.SetMapIndex(reflect.ValueOf(key), e)
		}
		v.Set(m)
	case planStruct:
		return d.structFields(p, arg, v)
	}
	return nil
}

var mapAnyType = reflect.TypeOf(map[string]any(nil))

// structFields decodes the entries of a struct's map: the check has
// matched every key to a field, in the fields' order.
func (d *planDecoder) structFields(p *typePlan, n uint64, v reflect.Value) error {
	next := 0
	for range n {
		_, klen := d.head()
		key := d.bytes(klen)
		for p.fields[next].key != string(key) {
			next++
		}
		f := &p.fields[next]
		next++
		if err := d.value(f.plan, v.Field(f.index)); err != nil {
			return err
		}
	}
	return nil
}

// integer sets v, of any integer kind, refusing a value out of its range.
func (d *planDecoder) integer(major byte, arg uint64, v reflect.Value) error {
	if err := intFits(v.Type(), major, arg); err != nil {
		return err
	}
	switch {
	case v.CanUint():
		v.SetUint(arg)
	case major == majorNegint:
		v.SetInt(-1 - int64(arg))
	default:
		v.SetInt(int64(arg))
	}
	return nil
}

// link decodes a link as Link.UnmarshalCBOR does.
func (d *planDecoder) link(l *Link) error {
	d.head() // tag 42
	_, n := d.head()
	b := d.bytes(n) // the check has found 0x00 and at least one byte after it
	c, err := internCID(b[1:], d.links)
	if err != nil {
		return err
	}
	l.Cid = c
	if d.collect {
		d.found = append(d.found, c)
	}
	return nil
}

// generic decodes any value of the data model as decMode does into an
// interface.
func (d *planDecoder) generic() (any, error) {
	switch b := d.data[d.pos]; b {
	case 0xf4, 0xf5:
		d.pos++
		return b == 0xf5, nil
	case 0xf6:
		d.pos++
		return nil, nil
	case 0xfb:
		f := math.Float64frombits(binary.BigEndian.Uint64(d.data[d.pos+1:]))
		d.pos += 9
		return f, nil
	}
	major, arg := d.head()
	switch major {
	case majorUint:
		if arg <= math.MaxInt64 {
			return int64(arg), nil
		}
		return new(big.Int).SetUint64(arg), nil
	case majorNegint:
		if arg <= math.MaxInt64 {
			return -1 - int64(arg), nil
		}
		z := new(big.Int).SetUint64(arg)
		return z.Neg(z.Add(z, big.NewInt(1))), nil
	case majorBytes:
		return append(make([]byte, 0, arg), d.bytes(arg)...), nil
	case majorText:
		return d.text(arg)
	case majorArray:
		s := make([]any, arg)
		for i := range s {
			x, err := d.generic()
			if err != nil {
				return nil, err
			}
			s[i] = x
		}
		return s, nil
	case majorMap:
		return d.mapAny(arg)
	}
	// A link: the check has seen tag 42 around a byte string holding
	// 0x00 and a valid CID.
	_, n := d.head()
	b := d.bytes(n)
	if d.collect {
		c, err := internCID(b[1:], d.links)
		if err != nil {
			return nil, err
		}
		d.found = append(d.found, c)
	}
	return cbor.Tag{Number: linkTag, Content: append(make([]byte, 0, n), b...)}, nil
}

func (d *planDecoder) mapAny(n uint64) (map[string]any, error) {
	m := make(map[string]any, n)
	for range n {
		_, klen := d.head()
		key, err := d.text(klen)
		if err != nil {
			return nil, err
		}
		x, err := d.generic()
		if err != nil {
			return nil, err
		}
		m[key] = x
	}
	return m, nil
}

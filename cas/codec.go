package cas

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"sync"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"
)

// linkTag is the CBOR tag of a CID in DAG-CBOR.
const linkTag = 42

// maxDepth bounds the nesting of arrays and maps a decoder accepts.
const maxDepth = 512

var (
	// encMode writes canonical DAG-CBOR: length-first map key order,
	// shortest integer and length heads, 64-bit floats only, no NaN or
	// infinity, definite lengths, nil containers as empty ones.
	encMode cbor.UserBufferEncMode

	// decMode reads strict DAG-CBOR. What it cannot see (integer head
	// width, key order, float width) the re-encoding check catches.
	decMode cbor.DecMode

	// plannedMode is decMode for data a plan has checked (canon.go):
	// keys in strict order cannot repeat, so it does not track them.
	plannedMode cbor.DecMode

	// walkMode reads DAG-CBOR written by other tools only to find its
	// links, so it tolerates invalid UTF-8 and duplicate keys.
	walkMode cbor.DecMode
)

func init() {
	var err error
	encMode, err = cbor.EncOptions{
		Sort:          cbor.SortLengthFirst,
		ShortestFloat: cbor.ShortestFloatNone,
		NaNConvert:    cbor.NaNConvertReject,
		InfConvert:    cbor.InfConvertReject,
		BigIntConvert: cbor.BigIntConvertShortest,
		IndefLength:   cbor.IndefLengthForbidden,
		NilContainers: cbor.NilContainerAsEmpty,
		TagsMd:        cbor.TagsAllowed,
	}.UserBufferEncMode()
	if err != nil {
		panic(err)
	}
	strict := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsAllowed,
		IntDec:            cbor.IntDecConvertSignedOrBigInt,
		BigIntDec:         cbor.BigIntDecodePointer,
		BignumTag:         cbor.BignumTagForbidden,
		DefaultMapType:    reflect.TypeOf(map[string]any(nil)),
		UTF8:              cbor.UTF8RejectInvalid,
		NaN:               cbor.NaNDecodeForbidden,
		Inf:               cbor.InfDecodeForbidden,
		MaxNestedLevels:   maxDepth,
		MaxArrayElements:  MaxBlockSize,
		MaxMapPairs:       MaxBlockSize,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
	}
	decMode, err = strict.DecMode()
	if err != nil {
		panic(err)
	}
	planned := strict
	planned.DupMapKey = cbor.DupMapKeyQuiet
	plannedMode, err = planned.DecMode()
	if err != nil {
		panic(err)
	}
	lenient := strict
	lenient.DupMapKey = cbor.DupMapKeyQuiet
	lenient.UTF8 = cbor.UTF8DecodeInvalid
	lenient.NaN = cbor.NaNDecodeAllowed
	lenient.Inf = cbor.InfDecodeAllowed
	lenient.BignumTag = cbor.BignumTagAllowed
	lenient.ExtraReturnErrors = cbor.ExtraDecErrorNone
	walkMode, err = lenient.DecMode()
	if err != nil {
		panic(err)
	}
}

// Link is a CID inside a typed hg object. It encodes as CBOR tag 42 over
// a byte string holding 0x00 and the binary CID, as DAG-CBOR requires.
type Link struct{ cid.Cid }

// MarshalCBOR implements [cbor.Marshaler]. It writes the tag and byte
// string heads itself: links are the most common item in hg objects.
func (l Link) MarshalCBOR() ([]byte, error) {
	if !l.Defined() {
		return nil, fmt.Errorf("encode link: undefined CID: %w", ErrInvalid)
	}
	b := l.KeyString() // the binary CID, without the copy Bytes makes
	out := make([]byte, 0, 6+len(b))
	out = append(out, 0xd8, linkTag)
	out = appendHead(out, majorBytes, uint64(1+len(b)))
	out = append(out, 0)
	return append(out, b...), nil
}

// UnmarshalCBOR implements [cbor.Unmarshaler]. It accepts exactly tag 42
// in its shortest head over one byte string with a shortest head.
func (l *Link) UnmarshalCBOR(data []byte) error {
	if len(data) < 2 || data[0] != 0xd8 || data[1] != linkTag {
		var t cbor.RawTag
		if err := decMode.Unmarshal(data, &t); err == nil && t.Number != linkTag {
			return fmt.Errorf("tag %d where a link (tag 42) was expected", t.Number)
		}
		return fmt.Errorf("a link must be tag 42 in its shortest form: %w", ErrNotCanonical)
	}
	major, n, size, ok := readHead(data[2:])
	if !ok || major != majorBytes || size != uint64(len(data)-2-n) {
		return fmt.Errorf("link: tag 42 must enclose one byte string: %w", ErrInvalid)
	}
	if !shortestHead(n, size) {
		return fmt.Errorf("link: byte string head is not the shortest: %w", ErrNotCanonical)
	}
	c, err := linkFromBytes(data[2+n:])
	if err != nil {
		return err
	}
	l.Cid = c
	return nil
}

// MarshalJSON writes the DAG-JSON form of a link.
func (l Link) MarshalJSON() ([]byte, error) {
	return []byte(`{"/":"` + l.String() + `"}`), nil
}

func linkBytes(c cid.Cid) []byte {
	b := c.Bytes()
	out := make([]byte, 1+len(b))
	copy(out[1:], b)
	return out
}

func linkFromBytes(b []byte) (cid.Cid, error) {
	if len(b) == 0 || b[0] != 0 {
		return cid.Undef, fmt.Errorf("link without the 0x00 multibase prefix: %w", ErrBadCID)
	}
	return CastCID(b[1:])
}

// Marshal encodes a typed hg object (a struct with cbor tags, whose links
// are [Link] values) as canonical DAG-CBOR.
func Marshal(v any) ([]byte, error) {
	b, err := encMode.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return b, nil
}

// Unmarshal decodes a typed hg object strictly: unknown fields, duplicate
// keys, indefinite lengths, invalid UTF-8 and trailing bytes are refused, and
// the value must re-encode to exactly data. For most types that last rule
// is checked on data against a plan of the type (canon.go), without
// encoding; *v is set to zero first, so data alone gives the value. Every
// error wraps [ErrNotCanonical].
func Unmarshal(data []byte, v any) error {
	return (&Decoder{}).Unmarshal(data, v)
}

// Decoder is [Unmarshal] and [Check] for a caller that holds many of the
// CIDs the objects it decodes link to, or that wants each block's links
// from the same pass, as a verifier does.
type Decoder struct {
	// Links, when set, returns the CID whose binary form (KeyString)
	// is raw, if the caller holds one: a typed object's link to it then
	// decodes to that CID, equal and sharing its memory, instead of
	// being parsed and allocated again.
	Links func(raw []byte) (cid.Cid, bool)
}

// Unmarshal is [Unmarshal], with d's Links.
func (d *Decoder) Unmarshal(data []byte, v any) error {
	_, err := d.unmarshal(data, v, false)
	return err
}

// UnmarshalLinks is Unmarshal that also returns the links of data, in the
// order they appear, as [Links] lists them.
func (d *Decoder) UnmarshalLinks(data []byte, v any) ([]cid.Cid, error) {
	return d.unmarshal(data, v, true)
}

func (d *Decoder) unmarshal(data []byte, v any, collect bool) ([]cid.Cid, error) {
	if p := planFor(v); p != nil && !reflect.ValueOf(v).IsNil() {
		// The plan's check gives the re-encoding's verdict (see
		// canon.go); the value starts from zero, as the re-encoding
		// would see any field the data does not set.
		if err := checkCanonical(p, data); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNotCanonical, err)
		}
		reflect.ValueOf(v).Elem().SetZero()
		pd := planDecoder{data: data, links: d.Links, collect: collect}
		if err := pd.value(p, reflect.ValueOf(v).Elem()); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNotCanonical, err)
		}
		return pd.found, nil
	}
	if err := unmarshalReencode(data, v); err != nil {
		return nil, err
	}
	return linksOf(data, collect)
}

// linksOf returns the links of data, which has decoded strictly, when
// collect is set.
func linksOf(data []byte, collect bool) ([]cid.Cid, error) {
	if !collect {
		return nil, nil
	}
	links, ok := scanLinks(data)
	if !ok {
		return nil, fmt.Errorf("%w: the links of the object cannot be read", ErrInvalid)
	}
	return links, nil
}

// Check reports whether [Unmarshal] would accept data for a value of the
// type v points at (v itself is not written), and why not: for a type
// with a plan (canon.go), without building the value, so that a verifier
// that needs an object's validity but not its content allocates nothing.
func Check(data []byte, v any) error {
	_, err := (&Decoder{}).check(data, v, false)
	return err
}

// CheckLinks is [Check] that also returns the links of data, in the order
// they appear, as [Links] lists them.
func (d *Decoder) CheckLinks(data []byte, v any) ([]cid.Cid, error) {
	return d.check(data, v, true)
}

func (d *Decoder) check(data []byte, v any, collect bool) ([]cid.Cid, error) {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return nil, fmt.Errorf("%w: check needs a pointer, not %T", ErrInvalid, v)
	}
	if p := planFor(v); p != nil {
		c := canonChecker{data: data, full: true, links: d.Links, collect: collect}
		if err := c.check(p); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNotCanonical, err)
		}
		return c.found, nil
	}
	return d.unmarshal(data, reflect.New(t.Elem()).Interface(), collect)
}

// unmarshalReencode is Unmarshal by decoding and encoding again.
func unmarshalReencode(data []byte, v any) error {
	if err := decMode.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %v", ErrNotCanonical, err)
	}
	buf := reencodePool.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 1<<20 {
			buf.Reset()
			reencodePool.Put(buf)
		}
	}()
	if err := encMode.MarshalToBuffer(v, buf); err != nil {
		return fmt.Errorf("%w: %v", ErrNotCanonical, err)
	}
	if !bytes.Equal(buf.Bytes(), data) {
		return fmt.Errorf("%w: encoding differs from the canonical one", ErrNotCanonical)
	}
	return nil
}

// reencodePool holds the buffers Unmarshal re-encodes into: the encoding
// is only compared, never kept.
var reencodePool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// EncodeNode encodes a value of the IPLD data model as canonical DAG-CBOR.
// The Go types of the data model are: nil, bool, int64 (and the other
// integer types), *big.Int within [-2^64, 2^64-1], float64 (finite),
// string (valid UTF-8), []byte, []any, map[string]any and cid.Cid.
func EncodeNode(n any) ([]byte, error) {
	v, err := toCBOR(n, 0)
	if err != nil {
		return nil, err
	}
	return Marshal(v)
}

// DecodeNode decodes one strict, canonical DAG-CBOR item into the data
// model types listed at [EncodeNode], with int64 or *big.Int for
// integers. Every error wraps [ErrNotCanonical]. The bytes are checked
// against the rules of DAG-CBOR (canon.go) rather than encoded again.
func DecodeNode(data []byte) (any, error) {
	if err := checkCanonical(anyPlan, data); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotCanonical, err)
	}
	d := planDecoder{data: data}
	v, err := d.generic()
	if err == nil {
		v, err = fromCBOR(v)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotCanonical, err)
	}
	return v, nil
}

var (
	minUint64Neg = new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 64)) // -2^64
	maxUint64    = new(big.Int).SetUint64(math.MaxUint64)
)

// toCBOR turns a data model value into one fxamacker/cbor encodes as
// DAG-CBOR, checking the rules the encoder cannot.
func toCBOR(n any, depth int) (any, error) {
	switch n.(type) {
	case []any, map[string]any:
		// depth counts the enclosing arrays and maps; the decoder accepts
		// at most maxDepth nested levels.
		if depth >= maxDepth {
			return nil, fmt.Errorf("nesting deeper than %d: %w", maxDepth, ErrInvalid)
		}
	}
	switch x := n.(type) {
	case nil, bool, string, []byte,
		int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		if s, ok := x.(string); ok && !utf8.ValidString(s) {
			return nil, fmt.Errorf("string is not valid UTF-8: %w", ErrInvalid)
		}
		return x, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("float %v: %w", x, ErrInvalid)
		}
		return x, nil
	case *big.Int:
		if x.Cmp(minUint64Neg) < 0 || x.Cmp(maxUint64) > 0 {
			return nil, fmt.Errorf("integer %s outside 64 bits: %w", x, ErrInvalid)
		}
		return x, nil
	case cid.Cid:
		if !x.Defined() {
			return nil, fmt.Errorf("undefined CID: %w", ErrInvalid)
		}
		return cbor.Tag{Number: linkTag, Content: linkBytes(x)}, nil
	case Link:
		return toCBOR(x.Cid, depth)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			v, err := toCBOR(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if !utf8.ValidString(k) {
				return nil, fmt.Errorf("map key is not valid UTF-8: %w", ErrInvalid)
			}
			v, err := toCBOR(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	default:
		return nil, fmt.Errorf("type %T is not in the data model: %w", n, ErrInvalid)
	}
}

// fromCBOR turns what the decoder produced into data model values,
// refusing every tag but 42.
func fromCBOR(v any) (any, error) {
	switch x := v.(type) {
	case cbor.Tag:
		if x.Number != linkTag {
			return nil, fmt.Errorf("tag %d is not allowed in DAG-CBOR", x.Number)
		}
		b, ok := x.Content.([]byte)
		if !ok {
			return nil, errors.New("tag 42 must enclose a byte string")
		}
		return linkFromBytes(b)
	case []any:
		for i, e := range x {
			n, err := fromCBOR(e)
			if err != nil {
				return nil, err
			}
			x[i] = n
		}
		return x, nil
	case map[string]any:
		for k, e := range x {
			n, err := fromCBOR(e)
			if err != nil {
				return nil, err
			}
			x[k] = n
		}
		return x, nil
	case float32:
		return float64(x), nil
	case cbor.SimpleValue:
		return nil, fmt.Errorf("simple value %d is not allowed in DAG-CBOR", x)
	case nil, bool, int64, *big.Int, float64, string, []byte:
		return x, nil
	default:
		return nil, fmt.Errorf("unexpected value of type %T", v)
	}
}

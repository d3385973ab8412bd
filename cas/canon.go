package cas

import (
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"
)

// This file checks that a block is the canonical encoding of a typed hg
// object by reading its bytes against a plan of the Go type, instead of
// encoding the decoded value again and comparing: the same verdict at a
// fraction of the cost (verification decodes some ten objects per
// receipt). A plan is built once per type, and only for types whose every
// field it understands; [Unmarshal] encodes again for any other.
//
// What the re-encoding accepts, and so what a plan demands:
//   - the generic rules of DAG-CBOR: shortest heads, definite lengths,
//     text keys in length-first order without repeats, valid UTF-8, tag 42
//     alone and only around a byte string opening with 0x00, 64-bit floats
//     other than NaN and the infinities, no simple values but false, true
//     and null;
//   - each field's value of the CBOR type its Go type encodes to: text for
//     strings, an integer for integers, an array (never null: nil encodes
//     as empty) for slices, and so on;
//   - every field without omitempty present, and a field with omitempty
//     present only when its value is not empty ("", 0, false, null, an
//     empty byte string, array or map), since encoding would omit it.
//
// Inside fields of interface or map[string]any type, whose values the
// decoder keeps as they are, a plan is stricter than the re-encoding: it
// refuses tags other than 42 and simple values other than false, true and
// null, which DAG-CBOR does not allow and hg never writes.

// planKind is what CBOR a field's Go type encodes to.
type planKind uint8

const (
	planText    planKind = iota + 1 // string
	planInt                         // any integer kind
	planBool                        // bool
	planBytes                       // []byte
	planArray                       // slice of elem
	planMap                         // map[string]elem
	planStruct                      // struct with cbor tags
	planLink                        // Link
	planPointer                     // pointer to elem: null or elem
	planAny                         // interface: any data-model value
)

type typePlan struct {
	typ    reflect.Type // the Go type planned
	kind   planKind
	elem   *typePlan   // planArray, planMap, planPointer
	fields []fieldPlan // planStruct, in canonical key order
}

type fieldPlan struct {
	key       string
	index     int // of the field in its struct
	omitempty bool
	plan      *typePlan
}

var (
	plans    sync.Map // reflect.Type -> *typePlan, or nil where no plan applies
	linkType = reflect.TypeOf(Link{})
	anyType  = reflect.TypeOf((*any)(nil)).Elem()
	// Types that encode themselves, by any interface the encoder or the
	// decoder honours, keep the re-encoding check.
	selfCoding = []reflect.Type{
		reflect.TypeOf((*cbor.Marshaler)(nil)).Elem(),
		reflect.TypeOf((*cbor.Unmarshaler)(nil)).Elem(),
		reflect.TypeOf((*encoding.BinaryMarshaler)(nil)).Elem(),
		reflect.TypeOf((*encoding.BinaryUnmarshaler)(nil)).Elem(),
		reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem(),
		reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem(),
	}
)

// planFor returns the plan of the type v points at, or nil.
func planFor(v any) *typePlan {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return nil
	}
	if p, ok := plans.Load(t); ok {
		return p.(*typePlan)
	}
	p, err := buildPlan(t.Elem(), map[reflect.Type]*typePlan{})
	if err != nil {
		p = nil
	}
	plans.Store(t, p)
	return p
}

var errNoPlan = errors.New("no plan")

func buildPlan(t reflect.Type, building map[reflect.Type]*typePlan) (*typePlan, error) {
	p, err := buildKind(t, building)
	if err != nil {
		return nil, err
	}
	p.typ = t
	return p, nil
}

func buildKind(t reflect.Type, building map[reflect.Type]*typePlan) (*typePlan, error) {
	if p, ok := building[t]; ok {
		return p, nil
	}
	switch {
	case t == linkType:
		return &typePlan{kind: planLink}, nil
	case t == anyType:
		return &typePlan{kind: planAny}, nil
	case t.Kind() == reflect.Pointer:
		// A pointer encodes as null or as what it points at, whose
		// own methods the plan of the element sees.
		return buildElemPlan(planPointer, t, building)
	}
	for _, i := range selfCoding {
		if t.Implements(i) || reflect.PointerTo(t).Implements(i) {
			return nil, errNoPlan
		}
	}
	switch t.Kind() {
	case reflect.String:
		return &typePlan{kind: planText}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return &typePlan{kind: planInt}, nil
	case reflect.Bool:
		return &typePlan{kind: planBool}, nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return &typePlan{kind: planBytes}, nil
		}
		return buildElemPlan(planArray, t, building)
	case reflect.Map:
		if t.Key() != reflect.TypeOf("") {
			return nil, errNoPlan
		}
		return buildElemPlan(planMap, t, building)
	case reflect.Struct:
		return buildStructPlan(t, building)
	}
	return nil, errNoPlan
}

// buildElemPlan builds the plan of a pointer, slice or map type t.
func buildElemPlan(kind planKind, t reflect.Type, building map[reflect.Type]*typePlan) (*typePlan, error) {
	p := &typePlan{kind: kind}
	building[t] = p // a type that holds itself meets this plan again
	elem, err := buildPlan(t.Elem(), building)
	if err != nil {
		return nil, err
	}
	p.elem = elem
	return p, nil
}

func buildStructPlan(t reflect.Type, building map[reflect.Type]*typePlan) (*typePlan, error) {
	p := &typePlan{kind: planStruct}
	building[t] = p
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return nil, errNoPlan // the encoder promotes an embedded struct's fields
		}
		if !f.IsExported() {
			if _, tagged := f.Tag.Lookup("cbor"); tagged {
				return nil, errNoPlan // a "_" field's tag sets options for the whole struct
			}
			continue
		}
		tag, ok := f.Tag.Lookup("cbor")
		if !ok {
			return nil, errNoPlan // a name the plan would have to guess
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		fp := fieldPlan{key: name, index: i}
		switch opts {
		case "":
		case "omitempty":
			fp.omitempty = true
		default:
			return nil, errNoPlan
		}
		if name == "" {
			return nil, errNoPlan
		}
		sub, err := buildPlan(f.Type, building)
		if err != nil {
			return nil, err
		}
		// Omitting an empty struct or link depends on how it encodes;
		// only what empty means from the bytes alone is planned.
		if fp.omitempty && (sub.kind == planStruct || sub.kind == planLink || sub.kind == planAny) {
			return nil, errNoPlan
		}
		fp.plan = sub
		p.fields = append(p.fields, fp)
	}
	slices.SortFunc(p.fields, func(a, b fieldPlan) int {
		if a.key == b.key {
			return 0
		}
		if keyBefore(a.key, []byte(b.key)) {
			return -1
		}
		return 1
	})
	for i := 1; i < len(p.fields); i++ {
		if p.fields[i].key == p.fields[i-1].key {
			return nil, errNoPlan
		}
	}
	return p, nil
}

// canonChecker reads one block against a plan.
type canonChecker struct {
	data []byte
	pos  int
	// full makes it check what is otherwise left to the decoder: UTF-8,
	// integers within their fields' range, the CIDs of links.
	full bool
	// In a full check, collect gathers the links met into found, parsed
	// or given by links (see Decoder.Links).
	collect bool
	found   []cid.Cid
	links   func(raw []byte) (cid.Cid, bool)
}

// checkCanonical reports why data is not the canonical encoding of a value
// of p's type, or nil.
func checkCanonical(p *typePlan, data []byte) error {
	c := canonChecker{data: data}
	return c.check(p)
}

func (c *canonChecker) check(p *typePlan) error {
	if err := c.value(p, 0); err != nil {
		return err
	}
	if c.pos != len(c.data) {
		return fmt.Errorf("%d bytes after the object", len(c.data)-c.pos)
	}
	return nil
}

var errTruncated = errors.New("truncated")

// head reads one item head in its shortest form.
func (c *canonChecker) head() (major byte, arg uint64, err error) {
	major, n, arg, ok := readHead(c.data[c.pos:])
	if !ok {
		if c.pos >= len(c.data) {
			return 0, 0, errTruncated
		}
		return 0, 0, fmt.Errorf("malformed or indefinite-length item at byte %d", c.pos)
	}
	if major != majorSimple && !shortestHead(n, arg) {
		return 0, 0, fmt.Errorf("the head at byte %d is not the shortest", c.pos)
	}
	c.pos += n
	return major, arg, nil
}

// take steps over n bytes of string content.
func (c *canonChecker) take(n uint64) ([]byte, error) {
	if n > uint64(len(c.data)-c.pos) {
		return nil, errTruncated
	}
	b := c.data[c.pos : c.pos+int(n)]
	c.pos += int(n)
	return b, nil
}

// text steps over a text string's content. Its UTF-8 is the decoder's
// to check, which refuses invalid text anywhere in the value, unless the
// check is full.
func (c *canonChecker) text(arg uint64) error {
	b, err := c.take(arg)
	if err == nil && c.full && !utf8.Valid(b) {
		return errBadUTF8
	}
	return err
}

// integer checks, in a full check, that an integer fits its field.
func (c *canonChecker) integer(p *typePlan, major byte, arg uint64) error {
	if !c.full {
		return nil
	}
	return intFits(p.typ, major, arg)
}

// intFits reports why the integer of major type major (unsigned or
// negative) and argument arg does not fit t, an integer type, or nil.
func intFits(t reflect.Type, major byte, arg uint64) error {
	bits := t.Bits()
	switch t.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if major == majorNegint || (bits < 64 && arg >= 1<<bits) {
			return fmt.Errorf("integer out of the range of %s", t)
		}
	default:
		if arg > 1<<(bits-1)-1 {
			return fmt.Errorf("integer out of the range of %s", t)
		}
	}
	return nil
}

// emptyItem is, for each kind a field with omitempty may have, the one
// encoding of the value that encoding omits ("", 0, false, an empty byte
// string, array or map, a nil pointer).
var emptyItem = [...]byte{planText: 0x60, planInt: 0x00, planBool: 0xf4, planBytes: 0x40,
	planArray: 0x80, planMap: 0xa0, planPointer: 0xf6}

// wantMajor is the major type each kind encodes to (a boolean is a simple
// value; an integer may also be negative).
var wantMajor = [...]byte{planText: majorText, planInt: majorUint, planBool: majorSimple,
	planBytes: majorBytes, planArray: majorArray, planMap: majorMap, planStruct: majorMap, planLink: majorTag}

var kindNames = [...]string{planText: "a text string", planInt: "an integer", planBool: "a boolean",
	planBytes: "a byte string", planArray: "an array", planMap: "a map", planStruct: "a map", planLink: "a link"}

func (c *canonChecker) value(p *typePlan, depth int) error {
	if depth > maxDepth {
		return errors.New("nested too deeply")
	}
	start := c.pos
	if p.kind == planAny {
		return c.generic(depth)
	}
	if p.kind == planPointer {
		if c.pos < len(c.data) && c.data[c.pos] == 0xf6 {
			c.pos++
			return nil
		}
		return c.value(p.elem, depth)
	}
	major, arg, err := c.head()
	if err != nil {
		return err
	}
	if major != wantMajor[p.kind] && !(p.kind == planInt && major == majorNegint) {
		return fmt.Errorf("byte %d: want %s", start, kindNames[p.kind])
	}
	if deepContainer(major, depth) {
		return errors.New("nested too deeply")
	}
	switch p.kind {
	case planText:
		return c.text(arg)
	case planInt:
		return c.integer(p, major, arg)
	case planBool:
		// One byte, f4 or f5: a simple value has no longer form.
		if c.pos != start+1 || (arg != 20 && arg != 21) {
			return fmt.Errorf("byte %d: want a boolean", start)
		}
		return nil
	case planBytes:
		_, err := c.take(arg)
		return err
	case planArray:
		if arg > uint64(len(c.data)-c.pos) {
			return errTruncated
		}
		for range arg {
			if err := c.value(p.elem, depth+1); err != nil {
				return err
			}
		}
		return nil
	case planMap:
		return c.mapEntries(arg, depth, p.elem)
	case planLink:
		// The decoder parses the CID (Link.UnmarshalCBOR), and a CID
		// it accepts encodes to the bytes it came from.
		return c.link(arg, start, true)
	}
	return c.structFields(p, arg, depth)
}

// structFields reads a struct's map of n entries against its fields:
// known keys only, in canonical order, every field without omitempty
// present, and no field with omitempty holding an empty value.
func (c *canonChecker) structFields(p *typePlan, n uint64, depth int) error {
	if n > uint64(len(c.data)-c.pos)/2 {
		return errTruncated
	}
	next := 0 // the fields before next have been met or skipped
	for range n {
		key, err := c.key()
		if err != nil {
			return err
		}
		// Fields are in canonical order, so a key is in order and not
		// repeated exactly when it is a field after the last one met.
		for next < len(p.fields) && keyBefore(p.fields[next].key, key) {
			if !p.fields[next].omitempty {
				return fmt.Errorf("field %q is missing", p.fields[next].key)
			}
			next++
		}
		if next == len(p.fields) || p.fields[next].key != string(key) {
			return fmt.Errorf("unknown, repeated or misplaced field %q", key)
		}
		f := &p.fields[next]
		next++
		if f.omitempty && c.pos < len(c.data) && c.data[c.pos] == emptyItem[f.plan.kind] {
			return fmt.Errorf("field %q holds an empty value, which is omitted", key)
		}
		if err := c.value(f.plan, depth+1); err != nil {
			return err
		}
	}
	for _, f := range p.fields[next:] {
		if !f.omitempty {
			return fmt.Errorf("field %q is missing", f.key)
		}
	}
	return nil
}

// key reads a map key, which must be text.
func (c *canonChecker) key() ([]byte, error) {
	at := c.pos
	major, arg, err := c.head()
	if err != nil {
		return nil, err
	}
	if major != majorText {
		return nil, fmt.Errorf("byte %d: a map key that is not text", at)
	}
	return c.take(arg)
}

// mapEntries reads n entries of a map whose keys must be text in
// canonical order and whose values must follow elem.
func (c *canonChecker) mapEntries(n uint64, depth int, elem *typePlan) error {
	if n > uint64(len(c.data)-c.pos)/2 {
		return errTruncated
	}
	var prev []byte
	for i := range n {
		key, err := c.key()
		if err != nil {
			return err
		}
		if i > 0 && !keyBefore(string(prev), key) {
			return fmt.Errorf("map key %q is out of order or repeated", key)
		}
		if c.full && !utf8.Valid(key) {
			return errBadUTF8
		}
		prev = key
		if err := c.value(elem, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// link reads the rest of a link whose tag head is read: tag 42 around a
// byte string opening with 0x00 and, in a field of type any or in a full
// check, a valid CID (the decoder parses a typed Link's). Refusals that
// only a field of type any meets say they are outside the data model.
func (c *canonChecker) link(tag uint64, start int, typed bool) error {
	if tag != linkTag {
		return fmt.Errorf("byte %d: tag %d, %s (only tag 42 is)", start, tag, outsideModel)
	}
	major, arg, err := c.head()
	if err != nil {
		return err
	}
	if major != majorBytes {
		return fmt.Errorf("byte %d: tag 42 must enclose a byte string", start)
	}
	b, err := c.take(arg)
	if err != nil {
		return err
	}
	where := ""
	if !typed {
		where = ", " + outsideModel
	}
	if len(b) < 2 || b[0] != 0 {
		return fmt.Errorf("byte %d: a link without the 0x00 prefix%s", start, where)
	}
	if typed && !c.full {
		return nil
	}
	l, err := internCID(b[1:], c.links)
	if err != nil {
		return fmt.Errorf("byte %d: a link to an invalid CID%s", start, where)
	}
	if c.collect {
		c.found = append(c.found, l)
	}
	return nil
}

// internCID parses the binary CID raw, or takes it from links (see
// Decoder.Links) when that holds it.
func internCID(raw []byte, links func(raw []byte) (cid.Cid, bool)) (cid.Cid, error) {
	if links != nil {
		if c, ok := links(raw); ok && c.KeyString() == string(raw) {
			return c, nil
		}
	}
	return CastCID(raw)
}

// generic reads any value of the data model.
func (c *canonChecker) generic(depth int) error {
	if depth > maxDepth {
		return errors.New("nested too deeply")
	}
	start := c.pos
	if start < len(c.data) && c.data[start]>>5 == majorSimple {
		return c.simple()
	}
	major, arg, err := c.head()
	if err != nil {
		return err
	}
	if deepContainer(major, depth) {
		return errors.New("nested too deeply")
	}
	switch major {
	case majorUint, majorNegint:
		return nil
	case majorBytes:
		_, err := c.take(arg)
		return err
	case majorText:
		return c.text(arg)
	case majorArray:
		if arg > uint64(len(c.data)-c.pos) {
			return errTruncated
		}
		for range arg {
			if err := c.generic(depth + 1); err != nil {
				return err
			}
		}
		return nil
	case majorMap:
		return c.mapEntries(arg, depth, anyPlan)
	}
	return c.link(arg, start, false)
}

var anyPlan = &typePlan{kind: planAny, typ: anyType}

// deepContainer reports whether an item of major type major at depth
// would nest past maxDepth levels, as the decoder counts them: arrays and
// maps, not the scalars and links inside the deepest of them.
func deepContainer(major byte, depth int) bool {
	return depth >= maxDepth && (major == majorArray || major == majorMap)
}

// outsideModel names the refusals by which a plan is stricter than the
// re-encoding: in a field of type any, the decoder keeps tags, simple
// values and links to invalid CIDs that the data model does not have.
const outsideModel = "outside the DAG-CBOR data model"

// simple reads false, true, null or a 64-bit float that is a number.
func (c *canonChecker) simple() error {
	b := c.data[c.pos]
	switch b {
	case 0xf4, 0xf5, 0xf6:
		c.pos++
		return nil
	case 0xfb:
		if len(c.data)-c.pos < 9 {
			return errTruncated
		}
		f := math.Float64frombits(binary.BigEndian.Uint64(c.data[c.pos+1:]))
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("byte %d: NaN or infinity", c.pos)
		}
		c.pos += 9
		return nil
	}
	return fmt.Errorf("byte %d: simple value or float 0x%02x, %s (false, true, null and 64-bit floats are)", c.pos, b, outsideModel)
}

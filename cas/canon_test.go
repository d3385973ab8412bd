package cas

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"
)

// canonInner and canonAll give a plan every kind it knows.
type canonInner struct {
	A string `cbor:"a"`
	B int64  `cbor:"b,omitempty"`
}

type canonAll struct {
	Text   string            `cbor:"text"`
	TextO  string            `cbor:"text_o,omitempty"`
	Int    int64             `cbor:"int"`
	IntO   int               `cbor:"io,omitempty"`
	Uint   uint8             `cbor:"u"`
	Bool   bool              `cbor:"bool"`
	BoolO  bool              `cbor:"bool_o,omitempty"`
	Bytes  []byte            `cbor:"bytes"`
	BytesO []byte            `cbor:"bytes_o,omitempty"`
	Link   Link              `cbor:"link"`
	Links  []Link            `cbor:"links"`
	LinksO []Link            `cbor:"links_o,omitempty"`
	Prior  *Link             `cbor:"prior,omitempty"`
	PtrN   *Link             `cbor:"ptr_n"`
	PInt   *int64            `cbor:"pint,omitempty"`
	Map    map[string]any    `cbor:"map"`
	MapO   map[string]any    `cbor:"map_o,omitempty"`
	MapS   map[string]string `cbor:"map_s"`
	Any    any               `cbor:"any"`
	Inner  canonInner        `cbor:"inner"`
	Inners []canonInner      `cbor:"inners"`
	InnerP *canonInner       `cbor:"inner_p,omitempty"`
	Strs   []string          `cbor:"strs"`
	hidden int
}

func canonSamples(t testing.TB) [][]byte {
	t.Helper()
	l1 := Link{Sum(DagCBOR, []byte("one"))}
	l2 := Link{Sum(Raw, []byte("two"))}
	zero := int64(0)
	samples := []canonAll{
		{Link: l1},
		{
			Text: "t", TextO: "o", Int: -5, IntO: 1 << 40, Uint: 200, Bool: true, BoolO: true,
			Bytes: []byte{}, BytesO: []byte{1}, Link: l2, Links: []Link{l1, l2}, LinksO: []Link{l1},
			Prior: &l1, PtrN: &l2, PInt: &zero,
			Map:  map[string]any{"a": int64(1), "bb": []any{"x", 1.5, nil, true, cbor.Tag{Number: linkTag, Content: linkBytes(l1.Cid)}}, "c": map[string]any{"d": []byte("e")}},
			MapO: map[string]any{"k": false}, MapS: map[string]string{"z": "y", "yy": ""},
			Any: []any{int64(-1), "s"}, Inner: canonInner{A: "a", B: 2},
			Inners: []canonInner{{A: "x"}, {A: "y", B: -1}}, InnerP: &canonInner{}, Strs: []string{"", "é"},
		},
		{Link: l1, Any: map[string]any{"n": nil}, Map: map[string]any{}, Text: strings.Repeat("long ", 60)},
	}
	var out [][]byte
	for _, s := range samples {
		data, err := Marshal(&s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

// The plan accepts whatever Marshal writes, decoding it to what the
// re-encoding path decodes.
func TestCanonicalPlanAcceptsCanonical(t *testing.T) {
	if planFor(&canonAll{}) == nil {
		t.Fatal("no plan for canonAll")
	}
	for i, data := range canonSamples(t) {
		var fast, slow canonAll
		fast.hidden, fast.Text = 7, "stale" // Unmarshal starts from zero
		if err := Unmarshal(data, &fast); err != nil {
			t.Fatalf("sample %d: %v", i, err)
		}
		if err := unmarshalReencode(data, &slow); err != nil {
			t.Fatalf("sample %d by re-encoding: %v", i, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("sample %d decodes to\n%+v\nnot\n%+v", i, fast, slow)
		}
	}
}

// sameVerdict checks that whatever the plan accepts, the re-encoding
// accepts too, with the same value: the plan is at least as strict.
func sameVerdict(t *testing.T, data []byte) (fastOK, slowOK bool) {
	t.Helper()
	var fast, slow canonAll
	errFast := Unmarshal(data, &fast)
	errSlow := unmarshalReencode(data, &slow)
	if errCheck := Check(data, &canonAll{}); (errCheck == nil) != (errFast == nil) {
		t.Fatalf("%x: Check says %v, Unmarshal %v", data, errCheck, errFast)
	}
	if errFast == nil && errSlow != nil {
		t.Fatalf("%x: the plan accepts what the re-encoding refuses: %v", data, errSlow)
	}
	if errFast == nil && !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%x: decodes to %+v, the re-encoding path to %+v", data, fast, slow)
	}
	return errFast == nil, errSlow == nil
}

// Every one-byte change, deletion and insertion of each sample gets the
// same verdict from the plan as from the re-encoding; where the
// re-encoding accepts a change (a different text, say), so does the plan.
func TestCanonicalPlanAgreesWithReencoding(t *testing.T) {
	accepted, refused := 0, 0
	for _, data := range canonSamples(t) {
		var variants [][]byte
		var what []string
		for i := range data {
			for _, b := range []byte{0x00, 0x01, 0x17, 0x18, 0x20, 0x40, 0x60, 0x61, 0x80, 0xa0, 0xc1, 0xd8, 0xf4, 0xf6, 0xf7, 0xfb, 0xff} {
				if data[i] != b {
					v := bytes.Clone(data)
					v[i] = b
					variants = append(variants, v)
					what = append(what, fmt.Sprintf("byte %d (0x%02x) set to 0x%02x", i, data[i], b))
				}
			}
			v := bytes.Clone(data)
			v[i] ^= 0x01
			variants = append(variants, v, append(bytes.Clone(data[:i]), data[i+1:]...))
			what = append(what, fmt.Sprintf("byte %d (0x%02x) flipped", i, data[i]), fmt.Sprintf("byte %d (0x%02x) deleted", i, data[i]))
		}
		for j, v := range variants {
			fastOK, slowOK := sameVerdict(t, v)
			if slowOK && !fastOK {
				var x canonAll
				if err := Unmarshal(v, &x); !stricterInAny(err) {
					t.Errorf("%s: the plan refuses what the re-encoding accepts: %v", what[j], err)
				}
			}
			if fastOK {
				accepted++
			} else {
				refused++
			}
		}
	}
	if accepted == 0 || refused == 0 {
		t.Fatalf("accepted %d, refused %d: the variants test nothing", accepted, refused)
	}
}

// Entries the re-encoding refuses and a plan must too: each a valid map
// otherwise.
func TestCanonicalPlanRefuses(t *testing.T) {
	l := Link{Sum(DagCBOR, []byte("one"))}
	base := map[string]any{
		"text": "", "int": int64(0), "u": int64(0), "bool": false, "bytes": []byte{}, "link": l.Cid,
		"links": []any{}, "ptr_n": nil, "map": map[string]any{}, "map_s": map[string]any{}, "any": nil,
		"inner": map[string]any{"a": ""}, "inners": []any{}, "strs": []any{},
	}
	if data, err := EncodeNode(base); err != nil {
		t.Fatal(err)
	} else if fastOK, _ := sameVerdict(t, data); !fastOK {
		t.Fatal("the base map is refused")
	}
	for name, change := range map[string]func(m map[string]any){
		"missing field":           func(m map[string]any) { delete(m, "text") },
		"unknown field":           func(m map[string]any) { m["extra"] = int64(1) },
		"empty omitempty text":    func(m map[string]any) { m["text_o"] = "" },
		"empty omitempty int":     func(m map[string]any) { m["io"] = int64(0) },
		"empty omitempty bool":    func(m map[string]any) { m["bool_o"] = false },
		"empty omitempty bytes":   func(m map[string]any) { m["bytes_o"] = []byte{} },
		"empty omitempty links":   func(m map[string]any) { m["links_o"] = []any{} },
		"empty omitempty map":     func(m map[string]any) { m["map_o"] = map[string]any{} },
		"null omitempty pointer":  func(m map[string]any) { m["prior"] = nil },
		"null text":               func(m map[string]any) { m["text"] = nil },
		"null int":                func(m map[string]any) { m["int"] = nil },
		"null slice":              func(m map[string]any) { m["links"] = nil },
		"null bytes":              func(m map[string]any) { m["bytes"] = nil },
		"null map":                func(m map[string]any) { m["map"] = nil },
		"float for int":           func(m map[string]any) { m["int"] = 1.0 },
		"text for bytes":          func(m map[string]any) { m["bytes"] = "x" },
		"bytes for text":          func(m map[string]any) { m["text"] = []byte("x") },
		"missing inner field":     func(m map[string]any) { m["inner"] = map[string]any{} },
		"empty inner omitempty":   func(m map[string]any) { m["inner"] = map[string]any{"a": "", "b": int64(0)} },
		"int key in struct":       func(m map[string]any) { m["inner"] = map[string]any{"A": ""} },
		"null link":               func(m map[string]any) { m["link"] = nil },
		"text in string map":      func(m map[string]any) { m["map_s"] = map[string]any{"a": int64(1)} },
		"bool for text in slice":  func(m map[string]any) { m["strs"] = []any{true} },
		"pointer to a wrong kind": func(m map[string]any) { m["pint"] = "x" },
	} {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		change(m)
		data, err := EncodeNode(m)
		if err != nil {
			t.Fatal(err)
		}
		if fastOK, slowOK := sameVerdict(t, data); fastOK || slowOK {
			t.Errorf("%s: plan %v, re-encoding %v; want both to refuse", name, fastOK, slowOK)
		}
	}
}

// Bytes DAG-CBOR forbids inside an any field, which the re-encoding
// lets through, the plan refuses.
func TestCanonicalPlanIsStricterInAny(t *testing.T) {
	data := canonSamples(t)[0]
	var v canonAll
	if err := Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	for name, item := range map[string][]byte{
		"tag 1":        {0xc1, 0x00},
		"undefined":    {0xf7},
		"simple 16":    {0xf0},
		"float32":      {0xfa, 0x3f, 0x80, 0x00, 0x00},
		"NaN":          {0xfb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0},
		"non-shortest": {0x18, 0x01},
	} {
		changed, ok := WithoutEntry(data, "any")
		if !ok {
			t.Fatal("no any entry")
		}
		changed, ok = WithEntry(changed, "any", item)
		if !ok {
			t.Fatal("cannot put the entry back")
		}
		if err := Unmarshal(changed, &v); err == nil {
			t.Errorf("%s in an any field: accepted", name)
		}
	}
}

// stricterInAny reports whether err is one of the refusals by which a plan
// is stricter than the re-encoding, inside fields of type any.
func stricterInAny(err error) bool {
	return err != nil && strings.Contains(err.Error(), outsideModel)
}

func FuzzCanonicalPlan(f *testing.F) {
	for _, s := range canonSamples(f) {
		f.Add(s)
		// A boolean's longer heads, which the plan once took.
		if i := bytes.IndexByte(s, 0xf5); i > 0 {
			f.Add(append(append(bytes.Clone(s[:i]), 0xf8, 0x15), s[i+1:]...))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameVerdict(t, data)
	})
}

// decodeNodeReencode is DecodeNode as it was, by decoding and encoding
// again: the reference the rules of DAG-CBOR are tested against.
func decodeNodeReencode(data []byte) (any, error) {
	var v any
	if err := decMode.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotCanonical, err)
	}
	n, err := fromCBOR(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotCanonical, err)
	}
	again, err := EncodeNode(n)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotCanonical, err)
	}
	if !bytes.Equal(again, data) {
		return nil, fmt.Errorf("%w: encoding differs from the canonical one", ErrNotCanonical)
	}
	return n, nil
}

// DecodeNode, which checks against the rules of DAG-CBOR, and decoding
// then encoding again give the same verdict and the same value, on every
// one-byte change of some nodes.
func TestDecodeNodeAgreesWithReencoding(t *testing.T) {
	l := Sum(DagCBOR, []byte("x"))
	var nodes [][]byte
	for _, n := range []any{
		map[string]any{"a": int64(-3), "bb": []any{"x", 2.5, nil, true, l, []byte{1}}, "c": map[string]any{"d": false}},
		[]any{int64(1) << 62, "é", map[string]any{}, []any{}},
		"text", int64(0), nil,
	} {
		data, err := EncodeNode(n)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, data)
	}
	for _, data := range nodes {
		for i := range data {
			for _, b := range []byte{0x00, 0x01, 0x18, 0x1b, 0x3b, 0x40, 0x60, 0x80, 0xa0, 0xc1, 0xd8, 0xf4, 0xf6, 0xf7, 0xf9, 0xfb, data[i] ^ 1} {
				v := bytes.Clone(data)
				v[i] = b
				nodeVerdict(t, v)
			}
			nodeVerdict(t, append(bytes.Clone(data[:i]), data[i+1:]...))
		}
	}
}

func nodeVerdict(t *testing.T, data []byte) {
	t.Helper()
	fast, errFast := DecodeNode(data)
	slow, errSlow := decodeNodeReencode(data)
	if (errFast == nil) != (errSlow == nil) {
		t.Fatalf("%x: DecodeNode says %v, the re-encoding %v", data, errFast, errSlow)
	}
	if errFast == nil && !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%x: DecodeNode gives %#v, the re-encoding %#v", data, fast, slow)
	}
}

func FuzzDecodeNodeVerdict(f *testing.F) {
	for _, n := range []any{map[string]any{"a": []any{int64(1), "b", nil}}, []any{2.5, []byte{1}}} {
		data, err := EncodeNode(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		nodeVerdict(t, data)
	})
}

// A Decoder's Links gives a decoded link the caller's CID; a CID that
// does not match the bytes is not used.
func TestDecoderLinks(t *testing.T) {
	held := map[string]cid.Cid{}
	for _, s := range []string{"one", "two"} {
		for _, codec := range []uint64{DagCBOR, Raw} {
			c := Sum(codec, []byte(s))
			held[c.KeyString()] = c
		}
	}
	wrong := Sum(DagCBOR, []byte("wrong"))
	calls := 0
	for i, data := range canonSamples(t) {
		var plain, fromHeld, fromWrong canonAll
		if err := Unmarshal(data, &plain); err != nil {
			t.Fatal(err)
		}
		d := Decoder{Links: func(raw []byte) (cid.Cid, bool) {
			calls++
			c, ok := held[string(raw)]
			return c, ok
		}}
		if err := d.Unmarshal(data, &fromHeld); err != nil || !reflect.DeepEqual(plain, fromHeld) {
			t.Fatalf("sample %d with held links: %v, %+v", i, err, fromHeld)
		}
		d.Links = func([]byte) (cid.Cid, bool) { return wrong, true }
		if err := d.Unmarshal(data, &fromWrong); err != nil || !reflect.DeepEqual(plain, fromWrong) {
			t.Fatalf("sample %d with a wrong link offered: %v, %+v", i, err, fromWrong)
		}
	}
	if calls == 0 {
		t.Fatal("Links was never asked")
	}
}

// UnmarshalLinks and CheckLinks return the links Links finds, in its
// order, with or without Links to take them from.
func TestDecoderCollectsLinks(t *testing.T) {
	for i, data := range canonSamples(t) {
		want, err := Links(Sum(DagCBOR, data), data)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 {
			continue
		}
		held := map[string]cid.Cid{want[0].KeyString(): want[0]}
		for _, d := range []*Decoder{{}, {Links: func(raw []byte) (cid.Cid, bool) { c, ok := held[string(raw)]; return c, ok }}} {
			var v canonAll
			got, err := d.UnmarshalLinks(data, &v)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("sample %d: UnmarshalLinks = %v, %v; want %v", i, got, err, want)
			}
			got, err = d.CheckLinks(data, (*canonAll)(nil))
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("sample %d: CheckLinks = %v, %v; want %v", i, got, err, want)
			}
		}
	}
}

type boolOnly struct {
	X bool `cbor:"x"`
}

type embedsUnexported struct {
	canonInner
	Y int64 `cbor:"y"`
}

type structOption struct {
	_ struct{} `cbor:",toarray"`
	Y int64    `cbor:"y"`
}

// A boolean is one byte, f4 or f5: the longer heads of simple values 20
// and 21 are refused, as the re-encoding refuses them.
func TestCanonicalPlanBooleans(t *testing.T) {
	for _, c := range []struct {
		item []byte
		ok   bool
	}{
		{[]byte{0xf5}, true},
		{[]byte{0xf4}, true},
		{[]byte{0xf8, 0x15}, false},
		{[]byte{0xf8, 0x14}, false},
		{[]byte{0xf9, 0x00, 0x15}, false},
		{[]byte{0xfa, 0, 0, 0, 0x15}, false},
		{[]byte{0xfb, 0, 0, 0, 0, 0, 0, 0, 0x15}, false},
	} {
		data := append([]byte{0xa1, 0x61, 'x'}, c.item...)
		var fast, slow boolOnly
		errFast, errSlow := Unmarshal(data, &fast), unmarshalReencode(data, &slow)
		if (errFast == nil) != c.ok || (errSlow == nil) != c.ok || (Check(data, &boolOnly{}) == nil) != c.ok {
			t.Errorf("%x: plan %v, re-encoding %v; want ok = %v", c.item, errFast, errSlow, c.ok)
		}
	}
}

// Types whose encoding a struct's unexported parts change keep the
// re-encoding.
func TestNoPlanForStructOptions(t *testing.T) {
	if planFor(&embedsUnexported{}) != nil || planFor(&structOption{}) != nil {
		t.Fatal("a plan for a struct with an embedded struct or a \"_\" option field")
	}
}

// Both paths accept 512 nested arrays or maps, with scalars and links
// inside the deepest, and refuse 513.
func TestCanonicalDepth(t *testing.T) {
	link, err := Marshal(Link{Sum(Raw, []byte("l"))})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		levels int
		leaf   []byte
		ok     bool
	}{
		{512, []byte{0x01}, true}, {512, link, true}, {511, []byte{0x80}, true}, {512, []byte{0x80}, false},
		{512, []byte{0xa0}, false}, {513, []byte{0x01}, false},
	} {
		raw := append(bytes.Repeat([]byte{0x81}, c.levels), c.leaf...)
		_, errFast := DecodeNode(raw)
		_, errSlow := decodeNodeReencode(raw)
		if (errFast == nil) != c.ok || (errSlow == nil) != c.ok {
			t.Errorf("%d levels around %x: plan %v, re-encoding %v; want ok = %v", c.levels, c.leaf, errFast, errSlow, c.ok)
		}
	}
}

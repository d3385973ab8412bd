package cas

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/ipfs/go-cid"
)

// Store is a content-addressed block store with named pins and refs,
// composed of the smaller interfaces below, as a reader that needs only
// blocks takes only a [BlockReader].
//
// Every method that returns block bytes verifies them against their CID
// first and returns a [*CorruptError] (wrapping [ErrCorrupt]) on a mismatch;
// a missing block is a [*NotFoundError] (wrapping [ErrNotFound]). Writes
// take [Block] values, which are correct by construction, so a store never
// hashes on the way in. All methods are safe for concurrent use. A
// cancelled ctx stops long scans between blocks and returns ctx.Err().
type Store interface {
	BlockReader
	BlockWriter
	BlockEnumerator
	PinStore
	RefStore

	// Close releases the store. Using it afterwards is an error.
	Close() error
}

// BlockReader reads blocks: all that walking, reading files and trees,
// and exporting need of a [Store].
type BlockReader interface {
	// Has reports whether the block is stored. It does not verify it.
	Has(ctx context.Context, c cid.Cid) (bool, error)

	// Get returns a verified copy of the block's bytes.
	Get(ctx context.Context, c cid.Cid) ([]byte, error)

	// View calls fn with the block's verified bytes, which are valid only
	// until fn returns and must not be modified. It returns fn's error.
	View(ctx context.Context, c cid.Cid, fn func(data []byte) error) error
}

// BlockWriter stores and removes blocks.
type BlockWriter interface {
	// Put stores the blocks in one atomic write: after a crash either all
	// of them are stored or none is. Blocks already present are skipped.
	// A block over [MaxBlockSize] is refused ([CheckBlockSizes]), and then
	// none of them is stored.
	Put(ctx context.Context, blocks ...Block) error

	// Delete removes the blocks that are present, atomically. Only garbage
	// collection should call it.
	Delete(ctx context.Context, cids ...cid.Cid) error
}

// BlockEnumerator lists the stored blocks.
type BlockEnumerator interface {
	// AllKeys calls fn with the CID and stored size of every block, in an
	// order fixed by the store. The bytes are not read or verified. If fn
	// returns an error, the scan stops and AllKeys returns it. A block
	// whose entry the store cannot read is reported with size -1 (View
	// of it returns the error), so that one damaged entry hides no other.
	AllKeys(ctx context.Context, fn func(c cid.Cid, size int) error) error
}

// PinStore keeps the user's pins: named roots.
type PinStore interface {
	// SetPin makes name point at c, replacing any earlier target.
	SetPin(ctx context.Context, name string, c cid.Cid) error

	// DeletePin removes the pin; a missing pin is an error wrapping
	// [ErrNotFound].
	DeletePin(ctx context.Context, name string) error

	// Pin returns the CID name points at, without listing every pin; a
	// missing pin is an error wrapping [ErrNotFound].
	Pin(ctx context.Context, name string) (cid.Cid, error)

	// Pins returns every pin, sorted by name.
	Pins(ctx context.Context) ([]Pin, error)
}

// RefStore keeps named CIDs in namespaces other than the user's pins:
// run state, the memo cache, belief logs. A namespace is 1 to 32
// lower-case letters; names follow the rules of pin names. gc keeps
// everything any ref reaches, as it does for pins. GetRef and DeleteRef
// of a missing ref return an error wrapping [ErrNotFound].
type RefStore interface {
	SetRef(ctx context.Context, ns, name string, c cid.Cid) error
	// SetRefs sets many refs at once, all or none: one transaction for
	// a scheduler's many memo entries instead of one each.
	SetRefs(ctx context.Context, refs ...Ref) error
	GetRef(ctx context.Context, ns, name string) (cid.Cid, error)
	DeleteRef(ctx context.Context, ns, name string) error
	Refs(ctx context.Context, ns string) ([]Pin, error)

	// RefNamespaces returns the namespaces that hold at least one ref,
	// sorted.
	RefNamespaces(ctx context.Context) ([]string, error)
}

// Pin is a named root: gc keeps everything a pin reaches.
type Pin struct {
	Name string  `json:"name"`
	CID  cid.Cid `json:"cid"`
}

var refNamespace = regexp.MustCompile(`^[a-z]{1,32}$`)

// CheckRefNamespace returns an error wrapping [ErrInvalid] unless ns is a
// valid ref namespace: 1 to 32 lower-case letters.
func CheckRefNamespace(ns string) error {
	if !refNamespace.MatchString(ns) {
		return fmt.Errorf("ref namespace %q: use 1-32 lower-case letters: %w", ns, ErrInvalid)
	}
	return nil
}

// CheckRef returns an error wrapping [ErrInvalid] unless ns is a valid
// ref namespace and name a valid ref name (the rules of pin names).
func CheckRef(ns, name string) error {
	if err := CheckRefNamespace(ns); err != nil {
		return err
	}
	return CheckPinName(name)
}

// Roots returns the CIDs of every pin and every ref in every namespace:
// what gc keeps.
func Roots(ctx context.Context, st Store) ([]cid.Cid, error) {
	pins, err := st.Pins(ctx)
	if err != nil {
		return nil, err
	}
	var out []cid.Cid
	for _, p := range pins {
		out = append(out, p.CID)
	}
	nss, err := st.RefNamespaces(ctx)
	if err != nil {
		return nil, err
	}
	for _, ns := range nss {
		refs, err := st.Refs(ctx, ns)
		if err != nil {
			return nil, err
		}
		for _, r := range refs {
			out = append(out, r.CID)
		}
	}
	return out, nil
}

var pinName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/@+-]{0,254}$`)

// CheckPinName returns an error wrapping [ErrInvalid] unless name is a
// valid pin name: 1 to 255 characters from letters, digits and ._/@+-,
// starting with a letter or digit, with no empty, "." or ".." segment.
func CheckPinName(name string) error {
	if !pinName.MatchString(name) {
		return fmt.Errorf("pin name %q: use 1-255 letters, digits and ._/@+-, starting with a letter or digit: %w", name, ErrInvalid)
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("pin name %q: empty, . or .. segment: %w", name, ErrInvalid)
		}
	}
	// A name that reads as a CID could never be used by name: commands
	// take a CID first.
	if _, err := cid.Decode(name); err == nil {
		return fmt.Errorf("pin name %q reads as a CID: %w", name, ErrInvalid)
	}
	return nil
}

// Ref is one named CID in a namespace, for [Store.SetRefs].
type Ref struct {
	NS, Name string
	CID      cid.Cid
}

// CheckRefs checks every ref as SetRef would, before a store writes any.
func CheckRefs(refs []Ref) error {
	for _, r := range refs {
		if err := CheckRef(r.NS, r.Name); err != nil {
			return err
		}
		if !r.CID.Defined() {
			return fmt.Errorf("ref %s/%s: undefined CID: %w", r.NS, r.Name, ErrInvalid)
		}
	}
	return nil
}

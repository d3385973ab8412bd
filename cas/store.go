package cas

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/ipfs/go-cid"
)

// Store is a content-addressed block store with named pins.
//
// Every method that returns block bytes verifies them against their CID
// first and returns a [*CorruptError] (wrapping [ErrCorrupt]) on a mismatch;
// a missing block is a [*NotFoundError] (wrapping [ErrNotFound]). Writes
// take [Block] values, which are correct by construction, so a store never
// hashes on the way in. All methods are safe for concurrent use. A
// cancelled ctx stops long scans between blocks and returns ctx.Err().
type Store interface {
	// Has reports whether the block is stored. It does not verify it.
	Has(ctx context.Context, c cid.Cid) (bool, error)

	// Get returns a verified copy of the block's bytes.
	Get(ctx context.Context, c cid.Cid) ([]byte, error)

	// View calls fn with the block's verified bytes, which are valid only
	// until fn returns and must not be modified. It returns fn's error.
	View(ctx context.Context, c cid.Cid, fn func(data []byte) error) error

	// Put stores the blocks in one atomic write: after a crash either all
	// of them are stored or none is. Blocks already present are skipped.
	Put(ctx context.Context, blocks ...Block) error

	// Delete removes the blocks that are present, atomically. Only garbage
	// collection should call it.
	Delete(ctx context.Context, cids ...cid.Cid) error

	// AllKeys calls fn with the CID and stored size of every block, in an
	// order fixed by the store. The bytes are not read or verified. If fn
	// returns an error, the scan stops and AllKeys returns it.
	AllKeys(ctx context.Context, fn func(c cid.Cid, size int) error) error

	// SetPin makes name point at c, replacing any earlier target.
	SetPin(ctx context.Context, name string, c cid.Cid) error

	// DeletePin removes the pin; a missing pin is an error wrapping
	// [ErrNotFound].
	DeletePin(ctx context.Context, name string) error

	// Pins returns every pin, sorted by name.
	Pins(ctx context.Context) ([]Pin, error)

	// Close releases the store. Using it afterwards is an error.
	Close() error
}

// Pin is a named root: gc keeps everything a pin reaches.
type Pin struct {
	Name string  `json:"name"`
	CID  cid.Cid `json:"cid"`
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
	return nil
}

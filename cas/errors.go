package cas

import (
	"errors"
	"fmt"

	"github.com/ipfs/go-cid"
)

// Sentinel errors. Callers test for them with [errors.Is]; the values
// returned are usually wrapped with the CID or path they concern.
var (
	// ErrNotFound is returned when a block, pin or path is absent.
	ErrNotFound = errors.New("not found")

	// ErrCorrupt is returned when stored or received bytes do not hash to
	// their CID. [*CorruptError] wraps it.
	ErrCorrupt = errors.New("block does not match its hash")

	// ErrNotCanonical is returned when a DAG-CBOR block that hg reads as one
	// of its own types is not in canonical form.
	ErrNotCanonical = errors.New("not canonical DAG-CBOR")

	// ErrInvalid is returned for input that is well formed but breaks a rule
	// of the data model: a bad tree entry name, an unknown link codec, a
	// value DAG-CBOR cannot hold.
	ErrInvalid = errors.New("invalid")

	// ErrBadCID is returned for a string or byte sequence that is not a CID.
	ErrBadCID = errors.New("not a valid CID")

	// ErrStoreBusy is returned when another process holds the store.
	// [*BusyError] wraps it.
	ErrStoreBusy = errors.New("store is in use")

	// ErrTooLarge is returned for a block over [MaxBlockSize].
	ErrTooLarge = errors.New("block too large")

	// ErrBadCAR is returned for a CAR file whose framing is broken:
	// truncated, oversize, or not a CAR header or section at all.
	// [*CARError] wraps it with the offset.
	ErrBadCAR = errors.New("malformed CAR file")
)

// CorruptError reports a block whose bytes do not hash to its CID.
type CorruptError struct {
	CID cid.Cid // the CID the bytes were stored under
	Got cid.Cid // the CID the bytes actually hash to (undefined if unknown)
}

func (e *CorruptError) Error() string {
	if e.Got.Defined() {
		return fmt.Sprintf("block %s is corrupt: its bytes hash to %s", e.CID, e.Got)
	}
	return fmt.Sprintf("block %s is corrupt", e.CID)
}

func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// BusyError reports that another process holds the store.
type BusyError struct {
	Path   string // the store directory
	Holder string // who holds it, as the holder wrote it ("pid 123: hg put big.iso since ..."), or ""
}

func (e *BusyError) Error() string {
	if e.Holder == "" {
		return fmt.Sprintf("store %s is in use by another process", e.Path)
	}
	return fmt.Sprintf("store %s is in use by %s", e.Path, e.Holder)
}

func (e *BusyError) Unwrap() error { return ErrStoreBusy }

// NotFoundError reports a missing block by CID.
type NotFoundError struct {
	CID cid.Cid
}

func (e *NotFoundError) Error() string { return fmt.Sprintf("block %s not found", e.CID) }

func (e *NotFoundError) Unwrap() error { return ErrNotFound }

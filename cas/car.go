package cas

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-varint"
)

// CAR framing. A CARv1 file is
//
//	varint(len(header)) || header
//	varint(len(cid)+len(data)) || cid || data     (one section per block)
//
// where header is the DAG-CBOR map {"roots": [CID, ...], "version": 1} and
// cid is the binary CID of the block data. A CARv2 file starts with an
// 11-byte pragma (a CARv1 header of version 2 with no roots), then a
// 40-byte header (16 bytes of characteristics, then the data offset, data
// size and index offset as little-endian uint64s), and holds a whole CARv1
// at the data offset; [CARReader] reads that inner CARv1 and ignores the
// index.

// Limits of the CAR reader. Bad input is refused before anything is
// allocated for it.
const (
	// MaxCARHeaderSize bounds the DAG-CBOR header of a CAR file: room for
	// tens of thousands of roots.
	MaxCARHeaderSize = 1 << 20

	// MaxCARCIDSize bounds the CID at the start of a section.
	MaxCARCIDSize = 256

	// MaxCARSectionSize bounds the length of one section: a CID and a
	// block of at most [MaxBlockSize] bytes.
	MaxCARSectionSize = MaxCARCIDSize + MaxBlockSize
)

const (
	carV2PragmaSize = 11 // varint(10) and the header {"version": 2}
	carV2HeaderSize = 40 // characteristics, data offset, data size, index offset
	carReadBuffer   = 256 << 10
)

// CARError reports what is wrong with a CAR file, and where: the part (a
// header or a section), the byte offset it starts at, and the CID of the
// section when it could be read. Err wraps [ErrBadCAR] for broken framing
// (truncated, oversize, unparseable), a [*CorruptError] for data that does
// not match its CID, [ErrNotCanonical] for an hg object that is not
// canonical, or the I/O error that stopped the read.
type CARError struct {
	Part   string  // "header", "CARv2 header" or "section"
	Offset int64   // where the part starts in the file
	CID    cid.Cid // the section's CID, if it could be parsed
	Err    error
}

func (e *CARError) Error() string {
	if e.CID.Defined() {
		return fmt.Sprintf("car %s at byte %d (%s): %v", e.Part, e.Offset, e.CID, e.Err)
	}
	return fmt.Sprintf("car %s at byte %d: %v", e.Part, e.Offset, e.Err)
}

func (e *CARError) Unwrap() error { return e.Err }

// carHeader is the DAG-CBOR header of a CARv1 file (and the pragma of a
// CARv2 file, which has version 2 and no roots).
type carHeader struct {
	Roots   []Link `cbor:"roots"`
	Version uint64 `cbor:"version"`
}

// Section is one block as a CAR file holds it. Its data has not been
// checked against its CID: see [NewBlockWithCID].
type Section struct {
	Offset int64   // where the section (its length varint) starts in the file
	CID    cid.Cid // the CID the section claims for Data
	Data   []byte
}

// CARReader reads the sections of a CARv1 file, or of the CARv1 inside a
// CARv2 file, one at a time and without seeking, so it reads pipes too.
// It checks the framing only: the caller verifies each block (see
// [ImportCAR], which does). Every error it returns, but io.EOF at the
// clean end, is a [*CARError]; after an error, Next returns it again.
type CARReader struct {
	br      *bufio.Reader
	off     int64 // offset in the file of the next byte br gives
	end     int64 // where the inner CARv1 of a CARv2 file ends, or -1
	roots   []cid.Cid
	version int
	err     error
}

// NewCARReader reads the header of a CAR file from r. A header with no
// roots is accepted (the CAR specification allows it; [ImportCAR] refuses
// it). Only versions 1 and 2 are read.
func NewCARReader(r io.Reader) (*CARReader, error) {
	cr := &CARReader{br: bufio.NewReaderSize(r, carReadBuffer), end: -1, version: 1}
	start := cr.off
	h, err := cr.readHeader()
	if err != nil {
		return nil, err
	}
	if h.Version == 2 {
		if err := cr.enterV2(); err != nil {
			return nil, err
		}
		start = cr.off
		if h, err = cr.readHeader(); err != nil {
			return nil, err
		}
	}
	if h.Version != 1 {
		return nil, &CARError{Part: "header", Offset: start, Err: fmt.Errorf("version %d, want 1 (or a CARv2 file): %w", h.Version, ErrBadCAR)}
	}
	cr.roots = make([]cid.Cid, len(h.Roots))
	for i, l := range h.Roots {
		cr.roots[i] = l.Cid
	}
	return cr, nil
}

// Roots returns the roots the header names, in its order.
func (cr *CARReader) Roots() []cid.Cid { return cr.roots }

// Version returns the version of the file: 1, or 2 for a CARv2 file
// (whose inner CARv1 the reader reads).
func (cr *CARReader) Version() int { return cr.version }

// Offset returns how many bytes of the file the reader has consumed.
func (cr *CARReader) Offset() int64 { return cr.off }

// Next returns the next section, or io.EOF after the last one.
func (cr *CARReader) Next() (Section, error) {
	return cr.next(func(n int) []byte { return make([]byte, n) })
}

// next is Next with the buffer for the data coming from alloc.
func (cr *CARReader) next(alloc func(n int) []byte) (Section, error) {
	if cr.err != nil {
		return Section{}, cr.err
	}
	s, err := cr.readSection(alloc)
	if err != nil {
		cr.err = err
	}
	return s, err
}

// readHeader reads a length-prefixed DAG-CBOR header.
func (cr *CARReader) readHeader() (carHeader, error) {
	start := cr.off
	fail := func(format string, args ...any) (carHeader, error) {
		return carHeader{}, &CARError{Part: "header", Offset: start, Err: fmt.Errorf(format, args...)}
	}
	n, err := cr.readUvarint()
	switch {
	case err == io.EOF && start == 0:
		return fail("empty file: %w", ErrBadCAR)
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return fail("truncated length: %w", ErrBadCAR)
	case err != nil && !isVarintError(err):
		return fail("read: %w", err)
	case err != nil:
		return fail("length: %v: %w", err, ErrBadCAR)
	case n == 0:
		return fail("empty header: %w", ErrBadCAR)
	case n > MaxCARHeaderSize:
		return fail("%d bytes, over the limit of %d: %w", n, MaxCARHeaderSize, ErrBadCAR)
	}
	if err := cr.within(int64(n)); err != nil {
		return fail("%w", err)
	}
	buf := make([]byte, n)
	if got, err := cr.readFull(buf); err != nil {
		if isTruncation(err) {
			return fail("truncated: %d of %d bytes present: %w", got, n, ErrBadCAR)
		}
		return fail("read: %w", err)
	}
	var h carHeader
	if err := walkMode.Unmarshal(buf, &h); err != nil {
		return fail("not a CAR header: %v: %w", err, ErrBadCAR)
	}
	return h, nil
}

// enterV2 reads the CARv2 header that follows the pragma and skips to the
// inner CARv1.
func (cr *CARReader) enterV2() error {
	start := cr.off
	fail := func(format string, args ...any) error {
		return &CARError{Part: "CARv2 header", Offset: start, Err: fmt.Errorf(format, args...)}
	}
	if start != carV2PragmaSize {
		return fail("the version 2 pragma is %d bytes, want %d: %w", start, carV2PragmaSize, ErrBadCAR)
	}
	var h [carV2HeaderSize]byte
	if got, err := cr.readFull(h[:]); err != nil {
		if isTruncation(err) {
			return fail("truncated: %d of %d bytes present: %w", got, carV2HeaderSize, ErrBadCAR)
		}
		return fail("read: %w", err)
	}
	dataOffset := binary.LittleEndian.Uint64(h[16:24])
	dataSize := binary.LittleEndian.Uint64(h[24:32])
	switch {
	case dataOffset < uint64(cr.off):
		return fail("data offset %d lies inside the header: %w", dataOffset, ErrBadCAR)
	case dataSize == 0:
		return fail("no data: %w", ErrBadCAR)
	case dataOffset > math.MaxInt64-dataSize:
		return fail("data offset %d and size %d overflow: %w", dataOffset, dataSize, ErrBadCAR)
	}
	for skip := int64(dataOffset) - cr.off; skip > 0; {
		n, err := cr.br.Discard(int(min(skip, 1<<30)))
		cr.off += int64(n)
		skip -= int64(n)
		if err != nil {
			if isTruncation(err) {
				return fail("the file ends at byte %d, before the data offset %d: %w", cr.off, dataOffset, ErrBadCAR)
			}
			return fail("read: %w", err)
		}
	}
	cr.end = int64(dataOffset + dataSize)
	cr.version = 2
	return nil
}

// readSection reads one section, or returns io.EOF at the clean end.
func (cr *CARReader) readSection(alloc func(int) []byte) (Section, error) {
	start := cr.off
	fail := func(c cid.Cid, format string, args ...any) (Section, error) {
		return Section{}, &CARError{Part: "section", Offset: start, CID: c, Err: fmt.Errorf(format, args...)}
	}
	if cr.end >= 0 && start == cr.end {
		return Section{}, io.EOF
	}
	n, err := cr.readUvarint()
	switch {
	case err == io.EOF && cr.end < 0:
		return Section{}, io.EOF
	case err == io.EOF:
		return fail(cid.Undef, "the file ends before the end of the CARv2 data at byte %d: %w", cr.end, ErrBadCAR)
	case err == io.ErrUnexpectedEOF:
		return fail(cid.Undef, "truncated length: %w", ErrBadCAR)
	case err != nil && !isVarintError(err):
		return fail(cid.Undef, "read: %w", err)
	case err != nil:
		return fail(cid.Undef, "length: %v: %w", err, ErrBadCAR)
	case n == 0:
		return fail(cid.Undef, "empty section: %w", ErrBadCAR)
	case n > MaxCARSectionSize:
		return fail(cid.Undef, "length %d is over the limit of %d bytes: %w", n, MaxCARSectionSize, ErrBadCAR)
	}
	if err := cr.within(int64(n)); err != nil {
		return fail(cid.Undef, "length %d: %w", n, err)
	}
	want := min(int(n), MaxCARCIDSize)
	peek, err := cr.br.Peek(want)
	if err != nil && !isTruncation(err) {
		return fail(cid.Undef, "read: %w", err)
	}
	k, c, cerr := cid.CidFromBytes(peek)
	if cerr != nil {
		if len(peek) < want {
			return fail(cid.Undef, "truncated: the file ends %d bytes into a section of %d: %w", len(peek), n, ErrBadCAR)
		}
		return fail(cid.Undef, "bad CID: %v: %w", cerr, ErrBadCAR)
	}
	if _, err := cr.br.Discard(k); err != nil {
		return fail(c, "read: %w", err)
	}
	cr.off += int64(k)
	size := int(n) - k
	if size > MaxBlockSize {
		return fail(c, "block of %d bytes, over the limit of %d: %w", size, MaxBlockSize, ErrBadCAR)
	}
	data, err := cr.readData(size, alloc)
	if err != nil {
		if isTruncation(err) {
			return fail(c, "truncated: %d of %d bytes of block data present: %w", len(data), size, ErrBadCAR)
		}
		return fail(c, "read: %w", err)
	}
	return Section{Offset: start, CID: c, Data: data}, nil
}

// readData reads size bytes of block data. Up to [ChunkSize] they go into
// a buffer from alloc; a bigger block grows its buffer as its bytes
// arrive, so a few bytes that declare a block of many MiB cost no more
// than they hold.
func (cr *CARReader) readData(size int, alloc func(int) []byte) ([]byte, error) {
	if size <= ChunkSize {
		data := alloc(size)
		n, err := cr.readFull(data)
		return data[:n], err
	}
	data := make([]byte, 0, ChunkSize)
	for len(data) < size {
		if len(data) == cap(data) {
			data = slices.Grow(data, min(cap(data), size-len(data)))
		}
		n, err := cr.readFull(data[len(data):min(cap(data), size)])
		data = data[:len(data)+n]
		if err != nil {
			return data, err
		}
	}
	return data, nil
}

// within checks that n more bytes fit in the inner CARv1 of a CARv2 file.
func (cr *CARReader) within(n int64) error {
	if cr.end >= 0 && n > cr.end-cr.off {
		return fmt.Errorf("runs past the end of the CARv2 data at byte %d: %w", cr.end, ErrBadCAR)
	}
	return nil
}

func (cr *CARReader) readUvarint() (uint64, error) {
	x, err := varint.ReadUvarint(cr.br)
	if err != nil {
		return 0, err
	}
	cr.off += int64(varint.UvarintSize(x))
	return x, nil
}

func (cr *CARReader) readFull(buf []byte) (int, error) {
	n, err := io.ReadFull(cr.br, buf)
	cr.off += int64(n)
	return n, err
}

func isTruncation(err error) bool {
	return err == io.EOF || err == io.ErrUnexpectedEOF
}

func isVarintError(err error) bool {
	return errors.Is(err, varint.ErrOverflow) || errors.Is(err, varint.ErrNotMinimal) || errors.Is(err, varint.ErrUnderflow)
}

// CARWriter writes a CARv1 file: the header when it is made, then one
// section per [CARWriter.WriteBlock]. It gathers small sections into
// large writes and hands the data of big blocks to w as they are, without
// copying them: call [CARWriter.Flush] after the last block.
type CARWriter struct {
	w   io.Writer
	n   int64  // bytes written to w
	buf []byte // sections not yet written
}

// Buffering of a CARWriter.
const (
	carWriteBuffer = 1 << 20  // sections gathered before a write
	carWriteDirect = 64 << 10 // block data written straight to w
)

// NewCARWriter starts a CARv1 file naming roots, to be written to w.
func NewCARWriter(w io.Writer, roots []cid.Cid) (*CARWriter, error) {
	h := carHeader{Roots: make([]Link, len(roots)), Version: 1}
	for i, c := range roots {
		h.Roots[i] = Link{c}
	}
	data, err := Marshal(&h)
	if err != nil {
		return nil, fmt.Errorf("car header: %w", err)
	}
	cw := &CARWriter{w: w, buf: make([]byte, 0, carWriteBuffer)}
	if err := cw.frame(data, nil); err != nil {
		return nil, err
	}
	return cw, nil
}

// WriteBlock writes b as the next section. A [Block] holds bytes that
// match its CID, so a CARWriter never writes a section that lies.
func (cw *CARWriter) WriteBlock(b Block) error {
	return cw.frame(b.cid.Bytes(), b.data)
}

// Flush writes the sections gathered so far.
func (cw *CARWriter) Flush() error {
	if len(cw.buf) == 0 {
		return nil
	}
	err := cw.write(cw.buf)
	cw.buf = cw.buf[:0]
	return err
}

// Written returns the bytes of the file so far, flushed or not.
func (cw *CARWriter) Written() int64 { return cw.n + int64(len(cw.buf)) }

// frame adds varint(len(head)+len(body)) || head || body.
func (cw *CARWriter) frame(head, body []byte) error {
	var length [binary.MaxVarintLen64]byte
	k := varint.PutUvarint(length[:], uint64(len(head)+len(body)))
	cw.buf = append(append(cw.buf, length[:k]...), head...)
	if len(body) >= carWriteDirect {
		if err := cw.Flush(); err != nil {
			return err
		}
		return cw.write(body)
	}
	cw.buf = append(cw.buf, body...)
	if len(cw.buf) >= carWriteBuffer {
		return cw.Flush()
	}
	return nil
}

func (cw *CARWriter) write(p []byte) error {
	n, err := cw.w.Write(p)
	cw.n += int64(n)
	if err != nil {
		return fmt.Errorf("write car: %w", err)
	}
	return nil
}

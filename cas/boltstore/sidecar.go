package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
	bolt "go.etcd.io/bbolt"
)

// Beside each pack file lies its sidecar, NNNNNNNN.packidx (as git keeps
// a .idx beside each pack): an append-only list of a record for every
// block written into the pack, its CID, offset and length. It is written
// in the same batch as the blocks, before the pack's fsync, and gets no
// fsync of its own: it is there for [Repair] alone, which rebuilds from
// it the index entries lost with an unreadable page of the database, and
// trusts nothing in it: a record counts only if the bytes it points at
// hash to its CID. So a record past a cut, a record of a block deleted
// and overwritten, a torn or forged record, recovers nothing false.
//
// A record is
//
//	"hgx1"  magic
//	uvarint length of the body
//	body    uvarint CID length, the binary CID, uvarint offset, uvarint length
//	crc32   (IEEE, big-endian) of the body
//
// A reader that meets bytes that are not a whole record skips to the
// next magic, so a torn append (a writer killed mid-write) costs only the
// record it tore.
//
// Blocks kept inline in the database are in no pack: their records, with
// their bytes, go to one more such file, inline.packidx, in the same way
// (appended before the commit, not synced on its own). Compaction
// rewrites it from the index when most of it is of blocks no longer
// stored.
const (
	sidecarExt = ".packidx"
	inlineLog  = "inline" + sidecarExt
)

var sidecarMagic = []byte("hgx1")

func sidecarName(n uint64) string { return fmt.Sprintf("%08d%s", n, sidecarExt) }

// appendRecord appends the sidecar record of the block c at l to b.
func appendRecord(b []byte, c cid.Cid, l location) []byte {
	key := c.Bytes()
	var body [3*binary.MaxVarintLen64 + 128]byte
	bb := body[:0]
	if len(key) > 128 {
		bb = make([]byte, 0, 3*binary.MaxVarintLen64+len(key))
	}
	bb = binary.AppendUvarint(bb, uint64(len(key)))
	bb = append(bb, key...)
	bb = binary.AppendUvarint(bb, l.offset)
	bb = binary.AppendUvarint(bb, l.length)
	return appendFrame(b, bb)
}

// appendFrame appends magic, length, body and checksum to b.
func appendFrame(b, body []byte) []byte {
	b = append(b, sidecarMagic...)
	b = binary.AppendUvarint(b, uint64(len(body)))
	b = append(b, body...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(body))
}

// appendInlineRecord appends the record of a block kept inline, c with
// its bytes data, to b: uvarint CID length, the binary CID, the bytes.
func appendInlineRecord(b []byte, c cid.Cid, data []byte) []byte {
	key := c.Bytes()
	b = append(b, sidecarMagic...)
	b = binary.AppendUvarint(b, uint64(uvarintLen(uint64(len(key)))+len(key)+len(data)))
	at := len(b)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = append(b, data...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[at:]))
}

func uvarintLen(x uint64) int {
	var tmp [binary.MaxVarintLen64]byte
	return binary.PutUvarint(tmp[:], x)
}

// sidecarRecord is one record read from a sidecar: not yet checked
// against the pack.
type sidecarRecord struct {
	key    []byte // the binary CID
	offset uint64
	length uint64
}

// parseSidecar returns the whole records of a sidecar's bytes, passing
// over what is not one.
func parseSidecar(data []byte) []sidecarRecord {
	var out []sidecarRecord
	for _, body := range parseFrames(data) {
		key, rest, ok := cutKey(body)
		if !ok {
			continue
		}
		r := sidecarRecord{key: key}
		for _, p := range []*uint64{&r.offset, &r.length} {
			x, n := binary.Uvarint(rest)
			if n <= 0 {
				ok = false
				break
			}
			*p, rest = x, rest[n:]
		}
		if ok && len(rest) == 0 {
			out = append(out, r)
		}
	}
	return out
}

// cutKey splits a record's body into its CID and the rest.
func cutKey(body []byte) (key, rest []byte, ok bool) {
	klen, j := binary.Uvarint(body)
	if j <= 0 || klen > uint64(len(body)-j) {
		return nil, nil, false
	}
	return body[j : j+int(klen)], body[j+int(klen):], true
}

// parseFrames returns the bodies of the whole frames in data, passing
// over what is not one.
func parseFrames(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		i := bytes.Index(data, sidecarMagic)
		if i < 0 {
			break
		}
		data = data[i+len(sidecarMagic):]
		size, k := binary.Uvarint(data)
		if k <= 0 || size > uint64(len(data)-k) || uint64(len(data)-k)-size < 4 {
			continue // resynchronise at the next magic
		}
		body := data[k : k+int(size)]
		if crc32.ChecksumIEEE(body) != binary.BigEndian.Uint32(data[k+int(size):]) {
			continue
		}
		out = append(out, body)
		data = data[k+int(size)+4:]
	}
	return out
}

// sidecarPath returns the file name of pack n's sidecar.
func (p *packs) sidecarPath(n uint64) string { return filepath.Join(p.dir, sidecarName(n)) }

// appendSidecar appends recs, whole records, to pack n's sidecar. A
// failure is returned, and the caller fails the write: a block stored
// without its record would be one repair could not recover.
func (p *packs) appendSidecar(n uint64, recs []byte) error {
	if len(recs) == 0 {
		return nil
	}
	p.mu.Lock()
	f, ok := p.sidecars[n]
	if !ok {
		var err error
		f, err = os.OpenFile(p.sidecarPath(n), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			p.mu.Unlock()
			return fmt.Errorf("open pack index %s: %w", sidecarName(n), err)
		}
		if p.sidecars == nil {
			p.sidecars = map[uint64]*os.File{}
		}
		p.sidecars[n] = f
	}
	p.mu.Unlock()
	if _, err := f.Write(recs); err != nil {
		return fmt.Errorf("write pack index %s: %w", sidecarName(n), err)
	}
	return nil
}

// closeSidecar closes pack n's sidecar, if open.
func (p *packs) closeSidecar(n uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f, ok := p.sidecars[n]; ok {
		f.Close()
		delete(p.sidecars, n)
	}
}

// recoverFromSidecar reads the sidecar of pack n, whose file is size
// bytes long, and calls add with each record whose CID have does not
// hold and whose bytes, read from the pack, hash to its CID. It returns
// how many records it read; a missing sidecar (a pack written before
// sidecars) has none.
func recoverFromSidecar(packsDir string, n uint64, size uint64, have func(key []byte) bool, add func(c cid.Cid, l location)) (int, error) {
	data, err := os.ReadFile(filepath.Join(packsDir, sidecarName(n)))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	recs := parseSidecar(data)
	if len(recs) == 0 {
		return 0, nil
	}
	f, err := os.Open(filepath.Join(packsDir, packName(n)))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var buf []byte
	for _, r := range recs {
		if r.length < packMin || r.offset > size || r.length > size-r.offset || have(r.key) {
			continue
		}
		c, err := cas.CastCID(r.key)
		if err != nil {
			continue
		}
		if uint64(cap(buf)) < r.length {
			buf = make([]byte, r.length)
		}
		buf = buf[:r.length]
		if _, err := f.ReadAt(buf, int64(r.offset)); err != nil {
			continue
		}
		if cas.Verify(c, buf) != nil {
			continue
		}
		add(c, location{pack: n, offset: r.offset, length: r.length})
	}
	return len(recs), nil
}

// appendInline appends recs, whole inline records, to the inline log.
func (p *packs) appendInline(recs []byte) error {
	if len(recs) == 0 {
		return nil
	}
	p.mu.Lock()
	f := p.inline
	if f == nil {
		if err := os.MkdirAll(p.dir, 0o700); err != nil {
			p.mu.Unlock()
			return err
		}
		var err error
		f, err = os.OpenFile(filepath.Join(p.dir, inlineLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			p.mu.Unlock()
			return fmt.Errorf("open %s: %w", inlineLog, err)
		}
		p.inline = f
	}
	p.mu.Unlock()
	if _, err := f.Write(recs); err != nil {
		return fmt.Errorf("write %s: %w", inlineLog, err)
	}
	return nil
}

// recoverInline reads the inline log and calls add with each record
// whose CID have does not hold and whose bytes hash to it. It returns
// how many records it read.
func recoverInline(packsDir string, have func(key []byte) bool, add func(key, data []byte)) (int, error) {
	data, err := os.ReadFile(filepath.Join(packsDir, inlineLog))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	frames := parseFrames(data)
	for _, body := range frames {
		key, block, ok := cutKey(body)
		if !ok || have(key) {
			continue
		}
		c, err := cas.CastCID(key)
		if err != nil || cas.Verify(c, block) != nil {
			continue
		}
		add(key, block)
	}
	return len(frames), nil
}

// inlineLogSlack: the inline log is rewritten when it is over this size
// and over twice what the inline blocks of the index take in it.
var inlineLogSlack int64 = 4 << 20 // tests lower it

// trimInlineLog rewrites the inline log from the index, when most of it
// is of blocks no longer stored inline: the records of the blocks the
// index holds inline, written to a new file, synced, renamed over the
// old. The caller holds the write lock (no Put appends meanwhile).
func (s *Store) trimInlineLog(ctx context.Context) error {
	path := filepath.Join(s.packs.dir, inlineLog)
	info, err := os.Stat(path)
	if err != nil || info.Size() <= inlineLogSlack {
		return nil // none, or small: nothing to trim
	}
	var out []byte
	err = view(s.db, func(tx *bolt.Tx) error {
		cur := tx.Bucket(bucketBlocks).Cursor()
		i := 0
		for k, v := cur.First(); k != nil; k, v = cur.Next() {
			if i++; i%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if len(v) == 0 || v[0] != tagInline {
				continue
			}
			c, err := cas.CastCID(k)
			if err != nil {
				continue
			}
			out = appendInlineRecord(out, c, v[1:])
			if int64(len(out)) > info.Size()/2 {
				return errKeep
			}
		}
		return nil
	})
	if err != nil {
		return nil // most of it is live, or the index cannot say: keep it
	}
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write(out)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp)
		return err
	}
	s.packs.mu.Lock()
	if s.packs.inline != nil {
		s.packs.inline.Close()
		s.packs.inline = nil
	}
	s.packs.mu.Unlock()
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	syncDir(s.packs.dir)
	return nil
}

var errKeep = errors.New("keep")

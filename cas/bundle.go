package cas

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
)

// Bundles: the closures of some roots moved between stores as CARv1 files.

// BundlePinName is the pin [ImportCAR] keeps a bundle's root under unless
// told otherwise: "bundle/" and the root's CID, so importing the same
// bundle twice changes nothing and two bundles never take each other's
// pins.
func BundlePinName(root cid.Cid) string { return "bundle/" + root.String() }

// ExportOptions tune [ExportCAR]. A nil *ExportOptions means the defaults.
type ExportOptions struct {
	// Progress, if set, is called with the bytes written so far, after
	// each block.
	Progress func(done int64)
}

// ExportResult says what [ExportCAR] wrote.
type ExportResult struct {
	Roots  []cid.Cid // the roots, without repeats, in the order given
	Blocks int       // blocks written, each once
	Bytes  int64     // bytes of block data written
	Size   int64     // bytes of the CAR file
}

// ExportCAR writes a CARv1 file to w naming roots (repeats dropped) and
// holding every block they reach, each once, in the order of [Walk]: depth
// first from each root in turn, parents before children, links in the
// order they appear. The same store and roots always give the same bytes.
// Every block comes from [BlockReader.View], which checks its hash before its
// bytes reach w; raw blocks are read and checked on all cores. A block
// missing from the store, damaged, or whose links cannot be read stops the
// export with an error, leaving w with a partial file: write to a
// temporary file and rename it.
func ExportCAR(ctx context.Context, st BlockReader, roots []cid.Cid, w io.Writer, opts *ExportOptions) (*ExportResult, error) {
	if opts == nil {
		opts = &ExportOptions{}
	}
	roots = uniqueCIDs(roots)
	if len(roots) == 0 {
		return nil, fmt.Errorf("export: no roots: %w", ErrInvalid)
	}
	cw, err := NewCARWriter(w, roots)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := &ExportResult{Roots: roots}
	results := fetchClosure(ctx, st, roots)
	fail := func(err error) (*ExportResult, error) {
		cancel()
		for range results {
		}
		return nil, err
	}
	for r := range results {
		if r.err != nil {
			return fail(r.err)
		}
		err := cw.WriteBlock(Block{cid: r.cid, data: r.data})
		res.Blocks++
		res.Bytes += int64(len(r.data))
		chunkPool.put(r.data)
		if err != nil {
			return fail(err)
		}
		if opts.Progress != nil {
			opts.Progress(cw.Written())
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := cw.Flush(); err != nil {
		return nil, err
	}
	res.Size = cw.Written()
	return res, nil
}

// closureBlock is a verified block of a closure, or the error that ended
// the walk.
type closureBlock struct {
	cid  cid.Cid
	data []byte
	err  error
}

// fetchClosure walks the closure of roots and delivers its blocks in walk
// order. The walk reads the blocks that have links itself (it needs them
// to go on); raw blocks, which hold the bytes of files, are read and
// verified by a worker per core.
func fetchClosure(ctx context.Context, st BlockReader, roots []cid.Cid) <-chan closureBlock {
	o := newOrdered[closureBlock](ctx, 4)
	go func() { // walk, in order
		defer o.done()
		err := Walk(ctx, st, roots, &WalkOptions{SkipRawData: true}, func(c cid.Cid, data []byte) error {
			var ok bool
			if c.Type() == Raw {
				ok = o.submit(func() closureBlock { return readBlock(ctx, st, c) })
			} else {
				buf := allocBlock(len(data)) // data is only valid inside the walk's View
				copy(buf, data)
				ok = o.ready(closureBlock{cid: c, data: buf})
			}
			if !ok {
				return ctx.Err()
			}
			return nil
		})
		if err != nil {
			o.ready(closureBlock{err: err})
		}
	}()
	return o.results
}

// readBlock reads and verifies one block into a buffer of its own.
func readBlock(ctx context.Context, st BlockReader, c cid.Cid) closureBlock {
	r := closureBlock{cid: c}
	r.err = st.View(ctx, c, func(data []byte) error {
		r.data = allocBlock(len(data))
		copy(r.data, data)
		return nil
	})
	return r
}

// allocBlock returns a buffer of n bytes: a recycled chunk buffer for
// blocks the size of file chunks, a buffer of its own size for the rest
// (many small blocks must not each hold a 1 MiB buffer).
func allocBlock(n int) []byte {
	if n > ChunkSize/2 && n <= ChunkSize {
		return chunkPool.get()[:n]
	}
	return make([]byte, n)
}

// ImportOptions tune [ImportCAR]. A nil *ImportOptions means the defaults.
type ImportOptions struct {
	// Pin names the pin of the bundle's root, which must then be the only
	// one. "" means [BundlePinName] for every root.
	Pin string

	// Progress, if set, is called with the bytes of the file read so far.
	Progress func(done int64)
}

// ImportResult says what [ImportCAR] stored.
type ImportResult struct {
	Roots      []Pin // each root and the pin that keeps it, in the header's order
	CARVersion int   // 1, or 2 for a CARv2 file read through its inner CARv1
	Blocks     int   // distinct blocks in the file
	NewBlocks  int   // of which the store did not hold before
	Bytes      int64 // bytes of the distinct blocks
	Size       int64 // bytes of the file read
}

// ImportCAR reads a CAR file (CARv1, or CARv2 through its inner CARv1)
// from r into st and pins each of its roots. It is all or nothing: on any
// error, the store is left as it was (no pin set or changed, no block
// added), unless the error also says that undoing failed.
//
// What it checks: the framing, with sections of at most
// [MaxCARSectionSize] bytes; every block against its CID, on all cores,
// with the CID's own hash function (one go-multihash does not implement is
// refused); that every hg object (a DAG-CBOR map whose "type" starts with
// "hg/") is canonical and, for files and trees, well formed; that the
// file names at least one root (a file with none is still checked to the
// end, so that damage is reported first); and that every block a root
// reaches is in the file or already in the store, with links hg can read,
// since gc must be able to walk whatever is pinned. Other blocks of any codec, including
// DAG-CBOR that is not canonical, are stored as opaque bytes under their
// hash. Repeated sections are checked and stored once. An error in the
// file is a [*CARError] naming the offset and CID of the first bad
// section.
//
// Blocks are stored in batches as they are read, so an import killed half
// way leaves blocks that no pin reaches (gc removes them), never a pin to
// an incomplete closure: pins are set last. A failed import deletes the
// blocks it added, so it must be the only writer to st while it runs.
func ImportCAR(ctx context.Context, st Store, r io.Reader, opts *ImportOptions) (*ImportResult, error) {
	if opts == nil {
		opts = &ImportOptions{}
	}
	if opts.Pin != "" {
		if err := CheckPinName(opts.Pin); err != nil {
			return nil, err
		}
	}
	cr, err := NewCARReader(r)
	if err != nil {
		return nil, err
	}
	roots := uniqueCIDs(cr.Roots())
	if opts.Pin != "" && len(roots) > 1 {
		return nil, fmt.Errorf("pin name %q given for a bundle of %d roots (leave it out to pin each as bundle/CID): %w", opts.Pin, len(roots), ErrInvalid)
	}
	imp := &importer{
		st:         st,
		w:          NewWriter(st),
		opts:       opts,
		seen:       make(map[cid.Cid]struct{}),
		links:      make(map[cid.Cid][]cid.Cid),
		unreadable: make(map[cid.Cid]error),
		res:        &ImportResult{CARVersion: cr.Version()},
	}
	imp.w.OnFlush = func(blocks []Block) {
		for _, b := range blocks {
			chunkPool.put(b.data)
		}
	}
	if err := imp.run(ctx, cr, roots); err != nil {
		return nil, imp.undo(ctx, err)
	}
	return imp.res, nil
}

// importer is the state of one ImportCAR.
type importer struct {
	st   Store
	w    *Writer
	opts *ImportOptions
	res  *ImportResult

	seen       map[cid.Cid]struct{}  // every block of the file
	links      map[cid.Cid][]cid.Cid // the links of those that have some
	unreadable map[cid.Cid]error     // those whose links cannot be read
	added      []cid.Cid             // blocks the store did not hold before
	pinned     []pinUndo             // pins set, to undo on failure
	checkOnly  bool                  // read and check the file, store nothing
}

// pinUndo says what a pin pointed at before the import set it.
type pinUndo struct {
	name string
	prev cid.Cid
	had  bool
}

func (imp *importer) run(ctx context.Context, cr *CARReader, roots []cid.Cid) error {
	// A file with no roots is still read and checked to the end, storing
	// nothing, so that damage is reported as damage.
	imp.checkOnly = len(roots) == 0
	if err := imp.load(ctx, cr); err != nil {
		return err
	}
	if imp.checkOnly {
		return fmt.Errorf("the bundle names no roots, so nothing would keep its blocks: %w", ErrInvalid)
	}
	if err := imp.w.Flush(ctx); err != nil {
		return err
	}
	done := make(map[cid.Cid]struct{})
	for _, root := range roots {
		if err := imp.checkRoot(ctx, root, done); err != nil {
			return err
		}
	}
	return imp.pin(ctx, roots)
}

// load reads, checks and stores every section, in file order.
func (imp *importer) load(ctx context.Context, cr *CARReader) error {
	// Only the reading and checking stop with load: the Writer stores
	// batches in the background, with ctx, after load returns.
	readCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	order := checkSections(readCtx, cr)
	fail := func(err error) error {
		cancel()
		for range order { // let the reader stop
		}
		return err
	}
	for s := range order {
		if s.err != nil {
			return fail(s.err)
		}
		if err := imp.add(ctx, s); err != nil {
			return fail(err)
		}
		if imp.opts.Progress != nil {
			imp.opts.Progress(s.end)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	imp.res.Size = cr.Offset()
	return nil
}

// add stores one checked section's block, unless the file or the store
// already had it.
func (imp *importer) add(ctx context.Context, s checkedSection) error {
	c := s.block.cid
	if _, dup := imp.seen[c]; dup {
		chunkPool.put(s.block.data)
		return nil
	}
	imp.seen[c] = struct{}{}
	if s.linkErr != nil {
		imp.unreadable[c] = s.linkErr
	} else if len(s.links) > 0 {
		imp.links[c] = s.links
	}
	imp.res.Blocks++
	imp.res.Bytes += int64(len(s.block.data))
	if imp.checkOnly {
		chunkPool.put(s.block.data)
		return nil
	}
	have, err := imp.st.Has(ctx, c)
	if err != nil {
		return err
	}
	if have {
		chunkPool.put(s.block.data)
		return nil
	}
	imp.added = append(imp.added, c)
	imp.res.NewBlocks++
	return imp.w.Add(ctx, s.block)
}

// checkRoot checks that every block root reaches is stored, and that hg
// can read the links of each (gc must walk whatever is pinned). Blocks of
// the file were checked as they were read; a block the file lacks must be
// in the store with its whole closure. Blocks in done were checked
// already, from an earlier root.
func (imp *importer) checkRoot(ctx context.Context, root cid.Cid, done map[cid.Cid]struct{}) error {
	stack := []cid.Cid{root}
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, ok := done[c]; ok {
			continue
		}
		done[c] = struct{}{}
		if _, ok := imp.seen[c]; !ok {
			if err := imp.checkStored(ctx, c); err != nil {
				return fmt.Errorf("bundle root %s is incomplete: %w", root, err)
			}
			continue
		}
		if err := imp.unreadable[c]; err != nil {
			return fmt.Errorf("bundle root %s cannot be pinned: hg cannot follow the links of %s, so gc could not keep what it reaches: %w", root, c, err)
		}
		stack = append(stack, imp.links[c]...)
	}
	return nil
}

// checkStored checks a block that is not in the file: the store must
// hold it and its whole closure.
func (imp *importer) checkStored(ctx context.Context, c cid.Cid) error {
	ok, err := imp.st.Has(ctx, c)
	if err != nil {
		return err
	}
	if !ok {
		return &NotFoundError{CID: c}
	}
	return CheckClosure(ctx, imp.st, c)
}

// pin sets the pin of each root, remembering what each pointed at.
func (imp *importer) pin(ctx context.Context, roots []cid.Cid) error {
	// What each name pointed at before this import set any of them.
	before := map[string]pinUndo{}
	for _, root := range roots {
		name := imp.opts.Pin
		if name == "" {
			name = BundlePinName(root)
		}
		u, seen := before[name]
		if !seen {
			prev, err := imp.st.Pin(ctx, name)
			if err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
			u = pinUndo{name: name, prev: prev, had: err == nil}
			before[name] = u
		}
		imp.pinned = append(imp.pinned, u)
		if err := imp.st.SetPin(ctx, name, root); err != nil {
			return err
		}
		imp.res.Roots = append(imp.res.Roots, Pin{Name: name, CID: root})
	}
	return nil
}

// undo puts the store back as it was after a failed import: the pins
// first, so that no pin ever points at a block being removed, then the
// blocks the import added. It runs even if ctx is cancelled (an
// interrupted import must still clean up) and returns cause, with any
// error of its own.
func (imp *importer) undo(ctx context.Context, cause error) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	if err := imp.w.wait(); err != nil && !errors.Is(cause, err) {
		errs = append(errs, err)
	}
	for i := len(imp.pinned) - 1; i >= 0; i-- {
		u := imp.pinned[i]
		var err error
		if u.had {
			err = imp.st.SetPin(ctx, u.name, u.prev)
		} else {
			err = imp.st.DeletePin(ctx, u.name)
			if errors.Is(err, ErrNotFound) {
				err = nil
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	for added := imp.added; len(added) > 0; {
		n := min(len(added), gcDeleteBatch)
		if err := imp.st.Delete(ctx, added[:n]...); err != nil {
			errs = append(errs, err)
			break
		}
		added = added[n:]
	}
	if c, ok := imp.st.(Compacter); ok && len(errs) == 0 && len(imp.added) > 0 {
		// The refused blocks' space goes back now, not at the next gc.
		if _, err := c.Compact(ctx, &CompactOptions{MaxUnused: UnusedLimit{Unlimited: true}}); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w; undoing the import failed too, 'hg gc' removes what it left: %w", cause, errors.Join(errs...))
	}
	return cause
}

// checkedSection is a section checked by checkSection.
type checkedSection struct {
	block   Block
	end     int64     // offset of the byte after the section
	links   []cid.Cid // the block's links, if linkErr is nil
	linkErr error     // why its links cannot be read
	err     error     // why the section is refused
}

// checkSections reads the sections of cr and checks them on all cores. It
// returns the results in file order, closed after the last section or the
// first error of the reader.
func checkSections(ctx context.Context, cr *CARReader) <-chan checkedSection {
	o := newOrdered[checkedSection](ctx, 4)
	go func() {
		defer o.done()
		for {
			s, err := cr.next(allocBlock)
			if err == io.EOF {
				return
			}
			if err != nil {
				o.ready(checkedSection{err: err})
				return
			}
			end := cr.Offset()
			if !o.submit(func() checkedSection {
				r := checkSection(s)
				r.end = end
				return r
			}) {
				return
			}
		}
	}()
	return o.results
}

// checkSection checks a section's block against its CID and, for an hg
// object, its canonical form, and reads its links.
func checkSection(s Section) checkedSection {
	fail := func(err error) checkedSection {
		return checkedSection{err: &CARError{Part: "section", Offset: s.Offset, CID: s.CID, Err: err}}
	}
	b, err := NewBlockWithCID(s.CID, s.Data)
	if errors.Is(err, mh.ErrSumNotSupported) {
		return fail(fmt.Errorf("hash function %s is not supported: %w", codecName(s.CID.Prefix().MhType), ErrInvalid))
	}
	if err != nil {
		return fail(err)
	}
	if s.CID.Type() == DagCBOR && objectType(s.Data) != "" {
		if _, err := DecodeNode(s.Data); err != nil {
			return fail(fmt.Errorf("hg object: %w", err))
		}
		if err := CheckObject(s.Data); err != nil {
			return fail(fmt.Errorf("hg object: %w", err))
		}
	}
	r := checkedSection{block: b}
	r.links, r.linkErr = Links(s.CID, s.Data)
	return r
}

// uniqueCIDs returns cs without repeats, in order.
func uniqueCIDs(cs []cid.Cid) []cid.Cid {
	seen := make(map[cid.Cid]struct{}, len(cs))
	out := make([]cid.Cid, 0, len(cs))
	for _, c := range cs {
		if _, ok := seen[c]; !ok {
			seen[c] = struct{}{}
			out = append(out, c)
		}
	}
	return out
}

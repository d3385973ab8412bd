package natsengine

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
	"github.com/nats-io/nats.go/jetstream"
)

// Workspaces travel block by block through the blocks bucket, an Object
// Store in which each block is an object named by its CID
// ([BlockObject]). An engine puts a workspace's blocks there before it
// queues the invocation, each block once: it skips a block whose object
// is already there with the block's SHA-256 digest. A worker walks the
// tree from its root, takes the blocks it has in its cache from there,
// fetches the others, and verifies every fetched block against its CID
// before it reads a link from it or caches it. See the package doc.

// WorkspaceOptions bound and observe a worker's workspace transfers.
type WorkspaceOptions struct {
	// CacheBytes bounds the bytes of the verified blocks a worker keeps
	// between invocations, so that it fetches a block once; the oldest
	// go first. Default 1 GiB; negative keeps none.
	CacheBytes int64
	// MaxBlocks and MaxBytes bound one workspace: a tree of more blocks,
	// or more bytes, is refused before more is fetched. Default 1<<20
	// blocks and 4 GiB (the whole tree is held in memory while the
	// invocation runs).
	MaxBlocks int
	MaxBytes  int64
	// Fetched, if set, is told of every block fetched from the blocks
	// bucket (not of those taken from the cache), with its size.
	Fetched func(c cid.Cid, size int)
}

// BlockObject is the name of block c's object in the blocks bucket: the
// word block and the CID's canonical text form.
func BlockObject(c cid.Cid) string { return "block-" + c.String() }

// blockParallel is how many blocks an engine puts, or a worker fetches,
// at once.
const blockParallel = 4

// blocksBucket makes sure the blocks bucket exists, as setup does the
// others.
func blocksBucket(ctx context.Context, js jetstream.JetStream, n Names) (jetstream.ObjectStore, error) {
	obs, err := js.ObjectStore(ctx, n.Blocks)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obs, err = js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket: n.Blocks, TTL: objectTTL, Replicas: n.Replicas, Description: "hg: blocks of workspaces, each an object named by its CID",
		})
		if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			obs, err = js.ObjectStore(ctx, n.Blocks)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("natsengine: object store %s: %w", n.Blocks, err)
	}
	return obs, nil
}

// digestOf is the Object Store's digest of data.
func digestOf(data []byte) string {
	h := sha256.New()
	h.Write(data)
	return jetstream.GetObjectDigestValue(h)
}

// blockPutter puts blocks in the blocks bucket for an engine, each once
// while its object lives: what it put, or found there, it remembers.
type blockPutter struct {
	obs jetstream.ObjectStore
	put func(c cid.Cid, size int)

	mu    sync.Mutex
	known map[cid.Cid]*putState
}

// putState is one block's object: being put (done open) or there since at.
type putState struct {
	done chan struct{}
	err  error
	at   time.Time
}

func newBlockPutter(ctx context.Context, js jetstream.JetStream, o Options) (*blockPutter, error) {
	obs, err := blocksBucket(ctx, js, o.Names)
	if err != nil {
		return nil, err
	}
	put := o.BlockPut
	if put == nil {
		put = func(cid.Cid, int) {}
	}
	return &blockPutter{obs: obs, put: put, known: map[cid.Cid]*putState{}}, nil
}

// invocation makes sure every block of inv's package and workspace is in
// the blocks bucket, so that a worker can fetch what it lacks.
func (p *blockPutter) invocation(ctx context.Context, inv scheduler.Invocation) error {
	if err := p.ensure(ctx, inv.PackageBlocks); err != nil {
		return fmt.Errorf("package %s: %w", inv.Package, err)
	}
	if !inv.Workspace.Defined() {
		return nil
	}
	root := false
	for _, b := range inv.WorkspaceBlocks {
		root = root || b.CID() == inv.Workspace
	}
	if !root {
		return fmt.Errorf("workspace %s: its root is not among the invocation's workspace blocks", inv.Workspace)
	}
	if err := p.ensure(ctx, inv.WorkspaceBlocks); err != nil {
		return fmt.Errorf("workspace %s: %w", inv.Workspace, err)
	}
	return nil
}

// ensure puts in the bucket those of blocks not there already,
// blockParallel at a time.
func (p *blockPutter) ensure(ctx context.Context, blocks []cas.Block) error {
	if blocks = p.unknown(blocks); len(blocks) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan cas.Block)
	errs := make(chan error, blockParallel)
	var wg sync.WaitGroup
	for range blockParallel {
		wg.Go(func() {
			for b := range next {
				if err := p.one(ctx, b); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		})
	}
feed:
	for _, b := range blocks {
		select {
		case next <- b:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return context.Cause(ctx)
}

// unknown returns those of blocks not put (or found) in the bucket
// recently: the others need no goroutine, nor a word with the server.
func (p *blockPutter) unknown(blocks []cas.Block) []cas.Block {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []cas.Block
	for _, b := range blocks {
		if !p.fresh(p.known[b.CID()]) {
			out = append(out, b)
		}
	}
	return out
}

// fresh reports whether s is a put that succeeded less than half the
// bucket's TTL ago. p.mu is held.
func (p *blockPutter) fresh(s *putState) bool {
	if s == nil {
		return false
	}
	select {
	case <-s.done:
		return s.err == nil && time.Since(s.at) < objectTTL/2
	default:
		return false
	}
}

// one makes sure block b is in the bucket: it waits for a put of it in
// progress, trusts one made less than half the bucket's TTL ago, and
// otherwise puts it.
func (p *blockPutter) one(ctx context.Context, b cas.Block) error {
	c := b.CID()
	for {
		p.mu.Lock()
		s := p.known[c]
		if p.fresh(s) {
			p.mu.Unlock()
			return nil
		}
		if s != nil {
			select {
			case <-s.done:
				s = nil // failed, or old: put it again
			default:
			}
		}
		if s != nil {
			p.mu.Unlock()
			select {
			case <-s.done:
				continue
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		s = &putState{done: make(chan struct{})}
		p.known[c] = s
		p.mu.Unlock()
		s.at, s.err = p.store(ctx, b)
		close(s.done)
		return s.err
	}
}

// store puts b in the bucket unless its object is there, young enough
// and with b's digest; it returns when the object was made.
func (p *blockPutter) store(ctx context.Context, b cas.Block) (time.Time, error) {
	name := BlockObject(b.CID())
	info, err := p.obs.GetInfo(ctx, name)
	switch {
	case err == nil && !info.Deleted && info.Size == uint64(len(b.Data())) &&
		info.Digest == digestOf(b.Data()) && time.Since(info.ModTime) < objectTTL/2:
		return info.ModTime, nil
	case err != nil && !errors.Is(err, jetstream.ErrObjectNotFound):
		return time.Time{}, fmt.Errorf("block %s: %w", b.CID(), err)
	}
	// Missing, old, or not the block's bytes: put (again).
	at := time.Now()
	if _, err := p.obs.PutBytes(ctx, name, b.Data()); err != nil {
		return time.Time{}, fmt.Errorf("put block %s: %w", b.CID(), err)
	}
	p.put(b.CID(), len(b.Data()))
	return at, nil
}

// withBlocks returns blocks and those of more whose CID is not among them.
func withBlocks(blocks, more []cas.Block) []cas.Block {
	if len(more) == 0 {
		return blocks
	}
	have := make(map[cid.Cid]bool, len(blocks))
	for _, b := range blocks {
		have[b.CID()] = true
	}
	return append(blocks, withoutBlocks(more, have)...)
}

// blockCache keeps verified blocks for a worker, the oldest dropped
// first once they are over max bytes.
type blockCache struct {
	max int64

	mu    sync.Mutex
	size  int64
	m     map[cid.Cid]cas.Block
	order []cid.Cid // oldest first
}

func (k *blockCache) get(c cid.Cid) (cas.Block, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	b, ok := k.m[c]
	return b, ok
}

// add keeps b, a block made by cas.NewBlockWithCID.
func (k *blockCache) add(b cas.Block) {
	n := int64(len(b.Data()))
	if n > k.max {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.m[b.CID()]; ok {
		return
	}
	for k.size+n > k.max && len(k.order) > 0 {
		old := k.order[0]
		k.order = k.order[1:]
		k.size -= int64(len(k.m[old].Data()))
		delete(k.m, old)
	}
	k.m[b.CID()] = b
	k.order = append(k.order, b.CID())
	k.size += n
}

// fetcher gets workspaces for a worker: from its cache, and from the
// blocks bucket what the cache lacks.
type fetcher struct {
	obs   jetstream.ObjectStore
	o     WorkspaceOptions
	cache *blockCache
	try   time.Duration // one read's bound; 0 is fetchTry
}

func newFetcher(ctx context.Context, js jetstream.JetStream, o WorkerOptions) (*fetcher, error) {
	obs, err := blocksBucket(ctx, js, o.Names)
	if err != nil {
		return nil, err
	}
	wo := o.Workspaces
	if wo.CacheBytes == 0 {
		wo.CacheBytes = 1 << 30
	}
	if wo.MaxBlocks <= 0 {
		wo.MaxBlocks = 1 << 20
	}
	if wo.MaxBytes <= 0 {
		wo.MaxBytes = 4 << 30
	}
	if wo.Fetched == nil {
		wo.Fetched = func(cid.Cid, int) {}
	}
	return &fetcher{obs: obs, o: wo, cache: &blockCache{max: max(wo.CacheBytes, 0), m: map[cid.Cid]cas.Block{}}}, nil
}

// tree returns every block of the tree root (a workspace, a package),
// each verified against its CID, and their CIDs as a set. It walks the tree a level at a time
// from the root, following only links read from verified blocks, and
// refuses a tree over the limits before it fetches more.
func (f *fetcher) tree(ctx context.Context, root cid.Cid) ([]cas.Block, map[cid.Cid]bool, error) {
	fail := func(err error) ([]cas.Block, map[cid.Cid]bool, error) {
		return nil, nil, err // the caller names the tree
	}
	seen := map[cid.Cid]bool{root: true}
	var out []cas.Block
	budget := new(atomic.Int64) // bytes left under MaxBytes
	budget.Store(f.o.MaxBytes)
	for level := []cid.Cid{root}; len(level) > 0; {
		blocks, err := f.level(ctx, level, budget)
		if err != nil {
			return fail(err)
		}
		level = nil
		for _, b := range blocks {
			out = append(out, b)
			links, err := cas.Links(b.CID(), b.Data())
			if err != nil {
				return fail(fmt.Errorf("%w: %w", ErrRefused, err))
			}
			for _, l := range links {
				if seen[l] {
					continue
				}
				if seen[l] = true; len(seen) > f.o.MaxBlocks {
					return fail(fmt.Errorf("%w: over the worker's limit of %d blocks", ErrRefused, f.o.MaxBlocks))
				}
				level = append(level, l)
			}
		}
	}
	return out, seen, nil
}

// level returns the blocks of cids, in their order: from the cache, or
// fetched blockParallel at a time. Each block's bytes are taken from
// budget, before it is fetched; a level that overdraws it is refused.
func (f *fetcher) level(ctx context.Context, cids []cid.Cid, budget *atomic.Int64) ([]cas.Block, error) {
	out := make([]cas.Block, len(cids))
	var missing []int
	for i, c := range cids {
		if b, ok := f.cache.get(c); ok {
			if budget.Add(-int64(len(b.Data()))) < 0 {
				return nil, f.overBytes()
			}
			out[i] = b
		} else {
			missing = append(missing, i)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	errs := make(chan error, blockParallel)
	var wg sync.WaitGroup
	for range min(blockParallel, len(missing)) {
		wg.Go(func() {
			for i := range next {
				b, err := f.fetch(ctx, cids[i], budget)
				if err != nil {
					errs <- err
					cancel()
					return
				}
				out[i] = b
			}
		})
	}
feed:
	for _, i := range missing {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return out, nil
}

// overBytes is the error of a workspace over MaxBytes.
func (f *fetcher) overBytes() error {
	return fmt.Errorf("%w: over the worker's limit of %d bytes", ErrRefused, f.o.MaxBytes)
}

// fetchTry bounds one read of a block's object, and fetchTries how many
// reads a block gets: a read the server stalls (a loaded server can leave
// an object's chunks undelivered) is tried again rather than holding the
// invocation until its engine gives up.
const (
	fetchTry   = 15 * time.Second
	fetchTries = 3
)

// fetch reads block c's object, at most cas.MaxBlockSize bytes of it
// and no more than budget holds, and verifies it against c before it
// caches it. A read that stalls past fetchTry is tried again.
func (f *fetcher) fetch(ctx context.Context, c cid.Cid, budget *atomic.Int64) (cas.Block, error) {
	for try := 1; ; try++ {
		tctx, cancel := context.WithTimeout(ctx, cmp.Or(f.try, fetchTry))
		b, took, err := f.fetchOnce(tctx, c, budget)
		stalled := err != nil && ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded)
		cancel()
		if !stalled || try == fetchTries {
			return b, err
		}
		budget.Add(took) // not spent: read again
	}
}

// fetchOnce is one read of fetch's; took is what it took from budget.
func (f *fetcher) fetchOnce(ctx context.Context, c cid.Cid, budget *atomic.Int64) (b cas.Block, took int64, err error) {
	name := BlockObject(c)
	r, err := f.obs.Get(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return cas.Block{}, 0, fmt.Errorf("block %s is not in the blocks bucket", c)
	}
	if err != nil {
		return cas.Block{}, 0, fmt.Errorf("block %s: %w", c, err)
	}
	defer r.Close()
	info, err := r.Info()
	if err != nil {
		return cas.Block{}, 0, fmt.Errorf("block %s: %w", c, err)
	}
	if info.Size > cas.MaxBlockSize {
		return cas.Block{}, 0, fmt.Errorf("%w: block %s: its object holds %d bytes, over the block limit", ErrRefused, c, info.Size)
	}
	took = int64(info.Size)
	if budget.Add(-took) < 0 {
		return cas.Block{}, took, f.overBytes()
	}
	data := []byte{}
	if info.Size > 0 {
		if data, err = io.ReadAll(io.LimitReader(r, cas.MaxBlockSize+1)); err != nil {
			return cas.Block{}, took, fmt.Errorf("block %s: %w", c, err)
		}
	}
	b, err = cas.NewBlockWithCID(c, data)
	if err != nil {
		return cas.Block{}, took, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	f.o.Fetched(c, len(data))
	f.cache.add(b)
	return b, took, nil
}

package cas

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"

	"github.com/ipfs/go-cid"
)

// FsckReport is what [Fsck] found.
type FsckReport struct {
	Blocks  int            `json:"blocks"`
	Bytes   int64          `json:"bytes"`
	Bad     []BadBlock     `json:"bad"`     // blocks whose bytes do not hash to their CID
	Missing []MissingIn    `json:"missing"` // blocks a pin reaches that are not stored
	Store   []StoreProblem `json:"store"`   // damage to the store's own structures
}

// OK reports whether fsck found nothing wrong.
func (r *FsckReport) OK() bool { return len(r.Bad) == 0 && len(r.Missing) == 0 && len(r.Store) == 0 }

// A StoreChecker is a [Store] that can check its own structures: what
// lies beside the blocks (an index, counts, files), which re-hashing the
// blocks cannot see. [Fsck] calls CheckStore first.
type StoreChecker interface {
	// CheckStore returns every problem it finds; the error is for a
	// failure to look.
	CheckStore(ctx context.Context) ([]StoreProblem, error)
}

// StoreProblem is damage to a store's own structures.
type StoreProblem struct {
	Where string `json:"where"` // what is damaged: "pack 00000001.pack", "index entry bafy..."
	Error string `json:"error"`
}

// BadBlock is a stored block that failed verification.
type BadBlock struct {
	CID   cid.Cid `json:"cid"`
	Error string  `json:"error"`
}

// MissingIn is a pin whose closure is incomplete or unreadable.
type MissingIn struct {
	Pin   string `json:"pin"`
	Error string `json:"error"`
}

// Fsck checks the store's own structures (if it is a [StoreChecker]),
// re-hashes every stored block (on all cores) and walks every pin's
// closure. progress, if set, is called with the number of blocks checked.
//
// A block [Store.AllKeys] reports with a size below zero is one whose
// entry the store cannot read: a StoreChecker names it; any other store's
// is listed as bad.
func Fsck(ctx context.Context, st Store, progress func(done int)) (*FsckReport, error) {
	rep := &FsckReport{Store: []StoreProblem{}}
	sc, checks := st.(StoreChecker)
	if checks {
		probs, err := sc.CheckStore(ctx)
		if err != nil {
			return nil, err
		}
		rep.Store = append(rep.Store, probs...)
	}
	jobs := make(chan cid.Cid, 256)
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for c := range jobs {
				err := st.View(ctx, c, func([]byte) error { return nil })
				mu.Lock()
				if err != nil && !errors.Is(err, context.Canceled) {
					rep.Bad = append(rep.Bad, BadBlock{CID: c, Error: err.Error()})
				}
				rep.Blocks++
				if progress != nil {
					progress(rep.Blocks)
				}
				mu.Unlock()
			}
		})
	}
	err := st.AllKeys(ctx, func(c cid.Cid, size int) error {
		if size < 0 && checks {
			return nil // named by CheckStore
		}
		rep.Bytes += int64(max(size, 0))
		jobs <- c
		return nil
	})
	close(jobs)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(rep.Bad, func(x, y BadBlock) int { return bytes.Compare(x.CID.Bytes(), y.CID.Bytes()) })
	pins, err := st.Pins(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range pins {
		if err := CheckClosure(ctx, st, p.CID); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			rep.Missing = append(rep.Missing, MissingIn{Pin: p.Name, Error: err.Error()})
		}
	}
	return rep, nil
}

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
	Blocks  int         `json:"blocks"`
	Bytes   int64       `json:"bytes"`
	Bad     []BadBlock  `json:"bad"`     // blocks whose bytes do not hash to their CID
	Missing []MissingIn `json:"missing"` // blocks a pin reaches that are not stored
}

// OK reports whether fsck found nothing wrong.
func (r *FsckReport) OK() bool { return len(r.Bad) == 0 && len(r.Missing) == 0 }

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

// Fsck re-hashes every stored block (on all cores) and walks every pin's
// closure. progress, if set, is called with the number of blocks checked.
func Fsck(ctx context.Context, st Store, progress func(done int)) (*FsckReport, error) {
	rep := &FsckReport{}
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
		rep.Bytes += int64(size)
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

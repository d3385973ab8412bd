package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// A pin that names one root is not moved to another by accident: as a git
// tag, moving it takes --force. Without that, the root it named would
// become garbage for the next gc with nothing said.

// pinnedElsewhere returns the root name pins, if it pins one other than c
// (c undefined: any root at all).
func pinnedElsewhere(ctx context.Context, st cas.Store, name string, c cid.Cid) (cid.Cid, bool, error) {
	old, err := st.Pin(ctx, name)
	switch {
	case errors.Is(err, cas.ErrNotFound):
		return cid.Undef, false, nil
	case err != nil:
		return cid.Undef, false, err
	}
	if !c.Defined() || !old.Equals(c) {
		return old, true, nil
	}
	return cid.Undef, false, nil
}

// errPinTaken says that name already pins old.
func errPinTaken(name string, old cid.Cid) error {
	return hinted{fmt.Errorf("pin %q already names %s", name, old),
		"--force moves it (what only it kept goes at the next gc); or choose another name"}
}

// setPin pins c under name, refusing to move a pin that names another
// root unless force.
func setPin(ctx context.Context, st cas.Store, name string, c cid.Cid, force bool) error {
	if !force {
		old, taken, err := pinnedElsewhere(ctx, st, name, c)
		if err != nil {
			return err
		}
		if taken {
			return errPinTaken(name, old)
		}
	}
	return st.SetPin(ctx, name, c)
}

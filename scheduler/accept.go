package scheduler

import (
	"github.com/haygent/hg/haygent/verify"
)

// sameWorkCheck is the acceptance's check that a verified receipt is the
// node's work w: its workspace snapshot is what the package's read grants
// let it see of the tree it was given.
func sameWorkCheck(v *verify.Verification, w *work) CheckRec {
	c := CheckRec{Name: "same work"}
	if c.Detail = sameWork(v, w, &acceptWords); c.Detail != "" {
		return c
	}
	c.OK, c.Detail = true, "package "+w.pkg.String()+" on the node's input"
	if w.workspace != emptyWorkspace {
		c.Detail += " and workspace " + w.workspace.String()
	}
	return c
}

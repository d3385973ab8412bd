package haygent

import (
	"crypto/sha256"
	"os"
)

// A test report in a file is evidence only when the step that declares it
// wrote it: a report already in the workspace, or put there by an earlier
// step (a builtin write_file fed by a slot, say), claims tests that the
// command never ran. The runtime marks the file before the command and
// compares after: a file the command did not create, or left as it was
// (same inode, same change time, same content), is refused.

// fileMark is what identifies one version of a file: present, its inode
// and change time where the system has them, and its content's digest.
type fileMark struct {
	present bool
	stamp   string // inode and change time (or, elsewhere, modification time)
	sum     [sha256.Size]byte
}

// markFile marks the file rel under root, never following a symbolic
// link out of it.
func markFile(root, rel string) fileMark {
	r, err := os.OpenRoot(root)
	if err != nil {
		return fileMark{}
	}
	defer r.Close()
	fi, err := r.Lstat(rel)
	if err != nil || !fi.Mode().IsRegular() {
		return fileMark{}
	}
	data, err := r.ReadFile(rel)
	if err != nil {
		return fileMark{}
	}
	return fileMark{present: true, stamp: changeStamp(fi), sum: sha256.Sum256(data)}
}

// reportNotWritten says why the report file, marked before the command and
// after it, is not the command's work, or "" if it is.
func reportNotWritten(step, file string, before, after fileMark) string {
	switch {
	case !after.present:
		return ""
	case before.present && before == after:
		return "report " + file + " was in the workspace before step " + step + " and its command did not write it: refused as evidence"
	}
	return ""
}

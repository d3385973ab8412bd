package haygent

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"syscall"
)

// A test report in a file is evidence only when the step that declares it
// wrote it: a report already in the workspace, or put there by an earlier
// step (a builtin write_file fed by a slot, say), claims tests that the
// command never ran. The runtime marks the file before the command and
// compares after: a file the command did not create, or left holding the
// bytes it held before (touched or not), is refused. A report that is not
// a regular file, or is over 64 MiB, is refused too, unread.

// fileMark is what identifies one version of a report file: whether it
// is there, and its content's digest.
type fileMark struct {
	present bool
	sum     [sha256.Size]byte
}

// markFile marks the report file rel under root as [readReport] reads it:
// absent, or unreadable as a report, it is not there.
func markFile(root, rel string) fileMark {
	data, why := readReport(root, rel)
	if why != "" || data == nil {
		return fileMark{}
	}
	return markOf(data)
}

// markOf marks report bytes already read.
func markOf(data []byte) fileMark {
	return fileMark{present: true, sum: sha256.Sum256(data)}
}

// reportNotWritten says why the report file, marked before the command and
// after it, is not the command's work, or "" if it is.
func reportNotWritten(step, file string, before, after fileMark) string {
	switch {
	case !after.present:
		return ""
	case before.present && before.sum == after.sum:
		// Unchanged, or touched (its times, its mode) or rewritten with
		// the very bytes that were planted: no test the command ran.
		return "report " + file + " was in the workspace before step " + step + " and its command did not write it: refused as evidence"
	}
	return ""
}

// maxReport is the largest report file the runtime reads.
const maxReport = 64 << 20

// readReport reads the report file rel under root: a regular file of at
// most maxReport bytes, opened without following a link out of root and
// without waiting on a FIFO or device. Otherwise it says why not.
func readReport(root, rel string) ([]byte, string) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, ""
	}
	defer r.Close()
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, "" // missing: the parser says so
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, "report " + rel + ": " + err.Error()
	case !fi.Mode().IsRegular():
		return nil, "report " + rel + " is not a regular file: refused as evidence"
	case fi.Size() > maxReport:
		return nil, fmt.Sprintf("report %s is %d bytes, over the %d a report may have: refused as evidence", rel, fi.Size(), maxReport)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxReport+1))
	if err != nil {
		return nil, "report " + rel + ": " + err.Error()
	}
	if len(data) > maxReport {
		return nil, fmt.Sprintf("report %s grew over the %d bytes a report may have: refused as evidence", rel, maxReport)
	}
	return data, ""
}

package haygent

import (
	"io/fs"
	"strconv"
	"syscall"
)

// changeStamp is a file's inode and change time: a write, a rename over
// it or a change of mode moves the change time, which no call sets back.
func changeStamp(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fi.ModTime().String()
	}
	return strconv.FormatUint(st.Ino, 10) + "/" + strconv.FormatInt(st.Ctim.Sec, 10) + "." + strconv.FormatInt(st.Ctim.Nsec, 10)
}

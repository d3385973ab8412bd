//go:build unix

package workspace

import "syscall"

// openNonblock keeps an open from blocking should a file be swapped for a
// named pipe between the check of its type and the open.
const openNonblock = syscall.O_NONBLOCK

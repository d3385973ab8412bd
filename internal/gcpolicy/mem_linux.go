package gcpolicy

import "golang.org/x/sys/unix"

// physicalMemory returns the machine's memory in bytes, or 0 if it cannot
// be read.
func physicalMemory() uint64 {
	var info unix.Sysinfo_t
	if err := unix.Sysinfo(&info); err != nil {
		return 0
	}
	return uint64(info.Totalram) * uint64(info.Unit)
}

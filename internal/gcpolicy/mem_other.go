//go:build !linux

package gcpolicy

// physicalMemory is not known here: no memory limit is set.
func physicalMemory() uint64 { return 0 }

//go:build !linux

package sandbox

import "syscall"

func escapeAttr(bool) *syscall.SysProcAttr { return nil }

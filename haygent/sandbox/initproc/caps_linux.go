package initproc

import (
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// startPowerless starts cmd without any capability: the init, root of its
// user namespace, holds them all there, and a command holding
// CAP_SYS_PTRACE could reach into the init (its status pipe, its memory)
// whatever its dumpable flag says. Capabilities, the bounding set and the
// secure bits belong to a thread, and a child takes them from the thread
// that forks it; so they are dropped on a thread of its own, which forks
// the command and then ends with its goroutine. It returns the stage that
// failed.
func startPowerless(cmd *exec.Cmd) (string, error) {
	type result struct {
		stage string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := dropCapabilities(); err != nil {
			done <- result{"drop capabilities", err}
			return
		}
		if err := cmd.Start(); err != nil {
			done <- result{"start", err}
			return
		}
		done <- result{}
	}()
	r := <-done
	return r.stage, r.err
}

// dropCapabilities empties this thread's bounding, ambient, inheritable,
// permitted and effective sets, and locks the secure bits so that no
// exec, not even as uid 0, gives any back.
func dropCapabilities() error {
	if err := unix.Prctl(unix.PR_SET_SECUREBITS,
		1<<0|1<<1| // SECBIT_NOROOT and its lock
			1<<2|1<<3| // SECBIT_NO_SETUID_FIXUP and its lock
			1<<5| // SECBIT_KEEP_CAPS_LOCKED
			1<<6|1<<7, // SECBIT_NO_CAP_AMBIENT_RAISE and its lock
		0, 0, 0); err != nil {
		return err
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return err
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return err
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	return unix.Capset(&hdr, &data[0])
}

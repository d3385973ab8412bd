//go:build !linux

package sandbox

import (
	"os/exec"
	"runtime"
	"syscall"
)

// groupKill reports that commands start in their own session and process
// group; not here.
const groupKill = false

func sysProcAttr(nsMode) *syscall.SysProcAttr { return nil }

// Available reports whether this process can run commands without network
// (see [Spec.NoNetwork]): on this system, never. reason says why.
func Available() (netns bool, reason string) {
	_, reason = probedMode()
	return false, reason
}

func probedMode() (nsMode, string) {
	return nsNone, "network namespaces need Linux, not " + runtime.GOOS
}

// watch returns a channel closed once cmd's process has exited and been
// reaped, and a function returning cmd.Wait's error.
func watch(cmd *exec.Cmd) (exited <-chan struct{}, reap func() error) {
	ch := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(ch)
	}()
	return ch, func() error {
		<-ch
		return waitErr
	}
}

// kill kills cmd's process; os.Process knows once it has been reaped and
// then does nothing.
func kill(cmd *exec.Cmd) {
	cmd.Process.Kill()
}

//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// groupKill reports that commands start in their own session and process
// group, which kill signals as a whole.
const groupKill = true

// sysProcAttr returns the process attributes for a run in mode m.
func sysProcAttr(m nsMode) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setsid: true}
	switch m {
	case nsNet:
		a.Cloneflags = syscall.CLONE_NEWNET
	case nsConfined:
		a.Cloneflags = syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
	case nsUserNet, nsUserConfined:
		a.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET
		if m == nsUserConfined {
			a.Cloneflags |= syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
		}
		// The runner's ids map to themselves; for a confined run, to 0,
		// so that its init holds the capabilities it needs to set up the
		// namespaces (it drops them all before the command starts).
		uid, gid := os.Getuid(), os.Getgid()
		if m == nsUserConfined {
			uid, gid = 0, 0
		}
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: os.Getuid(), Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: os.Getgid(), Size: 1}}
	}
	return a
}

var probe struct {
	once   sync.Once
	mode   nsMode
	reason string
}

// Available reports whether this process can run commands without network
// (see [Spec.NoNetwork]). The answer is probed once, by starting `true`
// from [DefaultPath] in each kind of namespace Run may use, and cached.
// reason names the kind that will be used ("netns+userns" or "netns"), or
// says why none can.
func Available() (netns bool, reason string) {
	m, reason := probedMode()
	if m == nsNone {
		return false, reason
	}
	return true, m.String()
}

func probedMode() (nsMode, string) {
	probe.once.Do(func() { probe.mode, probe.reason = probeModes() })
	return probe.mode, probe.reason
}

func probeModes() (nsMode, string) {
	path, err := resolve("true", nil, "/")
	if err != nil {
		return nsNone, "cannot probe for namespaces: " + err.Error()
	}
	var failures []string
	for _, m := range []nsMode{nsUserNet, nsNet} {
		cmd := &exec.Cmd{Path: path, Args: []string{"true"}, Env: []string{}, SysProcAttr: sysProcAttr(m)}
		err := cmd.Run()
		if err == nil {
			return m, ""
		}
		failures = append(failures, fmt.Sprintf("%v: %v", m, err))
	}
	return nsNone, strings.Join(failures, "; ")
}

// watch returns a channel closed once cmd's process has exited, and a
// function, to be called after that, that reaps it with cmd.Wait. The
// process is left a zombie until reap, so its pid, which is also its
// process group id, cannot be reused while the group is being killed.
func watch(cmd *exec.Cmd) (exited <-chan struct{}, reap func() error) {
	ch := make(chan struct{})
	var reaped bool
	var waitErr error
	go func() {
		defer close(ch)
		for {
			var info unix.Siginfo
			err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err == nil {
				return
			}
			if err != unix.EINTR {
				break
			}
		}
		// waitid is not usable: fall back to reaping here.
		waitErr = cmd.Wait()
		reaped = true
	}()
	return ch, func() error {
		<-ch
		if reaped {
			return waitErr
		}
		return cmd.Wait()
	}
}

// kill sends SIGKILL to cmd's process group.
func kill(cmd *exec.Cmd) {
	unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
}

//go:build !linux

package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
)

// confineMode is what Run consults for Confine: on this system, nothing.
var confineMode = func() (confinement, string) {
	return confinement{}, "confinement needs Linux, not " + runtime.GOOS
}

// Confinement reports what a confined run gets on this system: nothing.
func Confinement() (ok bool, what string) {
	_, reason := confineMode()
	return false, reason
}

type confinedRun struct {
	cmd    *exec.Cmd
	status *os.File
}

type confinedResult struct {
	code   int
	signal string
}

func startConfined(confinement, Spec, string, []string, string) (*confinedRun, error) {
	return nil, errors.New("sandbox: confinement needs Linux")
}

func (r *confinedRun) started() {}

func (r *confinedRun) done() (confinedResult, string, error) {
	return confinedResult{}, "", errors.New("sandbox: confinement needs Linux")
}

package haygent_test

import (
	"os"
	"testing"

	"github.com/haygent/hg/haygent/sandbox"
)

// TestMain lets this test binary start the init of confined exec steps.
func TestMain(m *testing.M) {
	sandbox.Init()
	os.Exit(m.Run())
}

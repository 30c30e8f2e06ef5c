package registry

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if goroutines outlive them. The
// package is pure Go and starts nothing long-lived, so nothing is ignored.
// Run with $UCXNET_TEST_FAKE_REGISTRY set, the test binary is instead
// another user's fake registry server (see runFakeRegistry).
func TestMain(m *testing.M) {
	if addr := os.Getenv(envFakeRegistry); addr != "" {
		os.Exit(runFakeRegistry(addr))
	}
	goleak.VerifyTestMain(m)
}

package stream

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if goroutines outlive them. The
// package is pure Go and starts nothing long-lived, so nothing is ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

//go:build !(linux && cgo)

package ucxnet

import (
	"errors"
	"testing"
)

// Without cgo (or off Linux) ucxnet builds, and every entry point fails
// with ErrUnsupported.
func TestUnsupportedBuild(t *testing.T) {
	_, err := NewTransport(Config{})
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("NewTransport: %v, want ErrUnsupported", err)
	}
	_, err = Dial(Network, "anything")
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Dial: %v, want ErrUnsupported", err)
	}
	_, err = Listen(Network, "anything")
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Listen: %v, want ErrUnsupported", err)
	}
}

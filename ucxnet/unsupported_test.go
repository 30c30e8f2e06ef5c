//go:build !(linux && cgo)

package ucxnet

import (
	"errors"
	"testing"
)

// Without cgo (or off Linux) ucxnet builds, and its transports run the
// kernel-TCP lane alone (noucx.go); forcing the UCX lane fails with
// ErrUnsupported.
func TestUnsupportedBuild(t *testing.T) {
	tr, err := NewTransport(Config{})
	if err != nil {
		t.Fatalf("NewTransport: %v", err)
	}
	defer tr.Close()
	if tr.haveUCX() {
		t.Fatal("a transport without UCX says it has UCX")
	}
	_, err = NewTransport(Config{Lane: LaneUCX})
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("NewTransport with the UCX lane forced: %v, want ErrUnsupported", err)
	}
}

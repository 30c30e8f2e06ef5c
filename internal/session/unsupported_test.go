//go:build !(linux && cgo)

package session

import (
	"errors"
	"testing"
)

// Without cgo (or off Linux) ucxnet builds, and its transports run the
// kernel-TCP lane alone (noucx.go); forcing the UCX lane fails with
// testUCX.Unsupported.
func TestUnsupportedBuild(t *testing.T) {
	tr, err := newUCXTransport(Config{})
	if err != nil {
		t.Fatalf("NewTransport: %v", err)
	}
	defer tr.Close()
	if tr.policy.haveUCX() {
		t.Fatal("a transport without UCX says it has UCX")
	}
	_, err = newUCXTransport(Config{Lane: LaneUCX})
	if !errors.Is(err, testUCX.Unsupported) {
		t.Fatalf("NewTransport with the UCX lane forced: %v, want testUCX.Unsupported", err)
	}
}

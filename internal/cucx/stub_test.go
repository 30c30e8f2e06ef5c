//go:build !(linux && cgo)

package cucx

import (
	"errors"
	"testing"
)

func TestOpenUnsupported(t *testing.T) {
	w, err := Open(nil)
	if w != nil || !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Open = %v, %v; want nil and ErrUnsupported", w, err)
	}
	var zero Worker
	if _, err := zero.Address(); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Address: %v", err)
	}
	if _, err := zero.Send(EP{}, nil, nil); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Send: %v", err)
	}
	if _, err := zero.Connect([]byte{0xff}); !errors.Is(err, ErrBadAddress) {
		t.Fatalf("Connect(bad): %v", err)
	}
	if evs, n := zero.Progress(nil, 8, nil); len(evs) != 0 || n != 0 {
		t.Fatal("Progress reported something")
	}
}

//go:build linux && cgo

package cucx

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// overSameHost reports whether an endpoint's transports ("sysv/memory")
// include a same-host one.
func overSameHost(tls []string) bool {
	return slices.ContainsFunc(tls, func(tl string) bool {
		name, _, _ := strings.Cut(tl, "/")
		return IsSameHostTransport(name)
	})
}

// TestStrippedAddressConnectsWithoutSharedMemory: a worker that offers
// shared memory and tcp, reached through its stripped address, is reached
// over tcp alone, and frames flow both ways; through its full address the
// same pair uses shared memory.
func TestStrippedAddressConnectsWithoutSharedMemory(t *testing.T) {
	settings := append(tlsSettings(), Setting{"TLS", "sm,tcp"})
	a := &node{w: openWorker(t, settings...)}
	b := &node{w: openWorker(t, settings...)}
	full, err := a.w.Address()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(transportNames(t, full), IsSameHostTransport) {
		t.Skip("UCX offers no shared memory here: nothing to strip")
	}
	stripped, err := StripSharedMemory(full)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		addr    []byte
		wantSHM bool
	}{{"stripped", stripped, false}, {"full", full, true}} {
		ep, err := b.w.Connect(tc.addr)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		frames := map[*node][]Event{}
		if _, err := b.w.Send(ep, hdr('s', 0), make([]byte, 100)); err != nil {
			t.Fatalf("%s: send: %v", tc.name, err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for len(frames[a]) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no frame arrived", tc.name)
			}
			pump(t, []*node{a, b}, frames, map[uint64]bool{})
		}
		tls := Transports(b.w.EPInfo(ep))
		t.Logf("%s address: %d B, transports %v", tc.name, len(tc.addr), tls)
		if got := overSameHost(tls); got != tc.wantSHM {
			t.Errorf("%s address: endpoint transports %v, shared memory %v, want %v", tc.name, tls, got, tc.wantSHM)
		}
		if !tc.wantSHM && !slices.ContainsFunc(tls, func(tl string) bool { return strings.HasPrefix(tl, "tcp/") }) {
			t.Errorf("%s address: endpoint transports %v without tcp", tc.name, tls)
		}
		_ = b.w.CloseEP(ep, true)
		pump(t, []*node{a, b}, frames, map[uint64]bool{})
	}
}

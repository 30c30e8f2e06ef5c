package session

// What the session needs of UCX itself. The UCX progress engine
// (internal/progress) needs cgo, and the session imports no cgo package:
// the face (package ucxnet) hands NewTransport a UCXBinding over the
// progress engine, as wireguard-go hands its device a conn.Bind; the
// session's tests hand in the same, or one whose Start makes in-memory
// engines.

import (
	"errors"
	"fmt"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/ucxconf"
	"github.com/ucxnet/ucxnet/registry"
)

// UCXBinding is what a transport uses of the UCX library: starting its
// progress engines, telling them from the others (the in-memory one of
// tests, noUCX), and reading packed worker addresses.
type UCXBinding struct {
	// Start starts a worker and its progress engine for cfg, delivering
	// to h; it fails with Unsupported in a build without UCX.
	Start StartEngine
	// Unsupported is the error that says this build has no UCX (built
	// without cgo, or off Linux).
	Unsupported error
	// IsUCX reports whether an engine is a UCX progress engine.
	IsUCX func(engine.Engine) bool
	// Library describes the UCX library loaded.
	Library func() UCXLibrary
	// Offer reads what a packed worker address offers; it fails for an
	// address this build cannot read.
	Offer func(addr []byte) (AddressOffer, error)
	// AddressRelease is the UCX release a packed worker address names
	// ("1.18"), "" if it names none (releases before 1.16) or is not one.
	AddressRelease func(addr []byte) string
	// ValidAddress reports whether addr is a packed worker address this
	// build would hand to UCX.
	ValidAddress func(addr []byte) bool
	// StripSharedMemory returns a packed worker address without its
	// shared-memory interfaces (posix, sysv, cma, knem, xpmem); empty if
	// nothing else is left. nil: addresses are used as they are (an
	// engine without shared memory).
	StripSharedMemory func(addr []byte) ([]byte, error)
}

// AddressOffer is what a packed worker address offers a peer, by the
// transports it names.
type AddressOffer struct {
	SharedMemory bool     // posix, sysv, xpmem, cma or knem: reachable from the same host
	RDMA         bool     // an InfiniBand/RoCE, EFA or uGNI transport
	TCP          bool     // UCX's tcp transport
	Transports   []string // the transports' names, in address order, without repeats
}

// errNoBinding is NewTransport's error for a binding that lacks a
// function the transport calls.
var errNoBinding = errors.New("ucxnet: session.NewTransport needs a UCXBinding with Start, Unsupported, IsUCX, Library, Offer, AddressRelease and ValidAddress")

// check fails for a binding the transport cannot run on: one without
// Start, or missing what the transport calls besides.
func (u UCXBinding) check() error {
	if u.Start == nil || u.Unsupported == nil || u.IsUCX == nil || u.Library == nil ||
		u.Offer == nil || u.AddressRelease == nil || u.ValidAddress == nil {
		return errNoBinding
	}
	return nil
}

// start starts an engine for cfg on u, delivering to h. Where u says this
// build has no UCX it starts noUCX, which runs the kernel-TCP lane alone,
// unless the lane is forced to UCX.
func (u UCXBinding) start(cfg Config, h engine.Handler) (engine.Engine, error) {
	eng, err := u.Start(cfg, h)
	if err != nil && errors.Is(err, u.Unsupported) {
		return startNoUCX(cfg, err) // kernel TCP only (noucx.go)
	}
	if err != nil {
		hint := ""
		if tls, set := ucxconf.EffectiveTLS(cfg.UCX); set {
			hint = fmt.Sprintf(" (UCX_TLS=%q: no usable transport?)", tls)
		}
		return nil, fmt.Errorf("ucxnet: starting UCX%s: %w", hint, err)
	}
	return eng, nil
}

// stripSharedMemory is u.StripSharedMemory, or addr as it is where the
// binding has none.
func (u UCXBinding) stripSharedMemory(addr []byte) ([]byte, error) {
	if u.StripSharedMemory == nil {
		return addr, nil
	}
	return u.StripSharedMemory(addr)
}

// listenerRelease is the UCX release a registry entry's listener runs:
// from its meta, else from its address ("1.15" for an address of a release
// before 1.16, which packs none); "" if unknown.
func (u UCXBinding) listenerRelease(e registry.Entry) string {
	if v := e.Meta[MetaUCXRelease]; v != "" {
		return v
	}
	if v := u.AddressRelease(e.Address); v != "" {
		return v
	}
	if u.ValidAddress(e.Address) {
		return "1.15"
	}
	return ""
}

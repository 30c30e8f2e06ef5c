package session

// What the session needs of UCX itself. The UCX progress engine
// (internal/progress) needs cgo, and the session imports no cgo package:
// package ucxnet, the one importer of progress, hands in what the session
// needs of it (SetUCX) when it is initialised, before any transport
// starts. Until then the session has no UCX: StartUCX runs noUCX
// (noucx.go), as a build without cgo does.

import (
	"errors"

	"github.com/ucxnet/ucxnet/internal/engine"
)

// UCXBinding is what a session uses of the UCX library: starting its progress
// engine, telling that engine from the others (the in-memory one of
// tests, noUCX), and reading packed worker addresses.
type UCXBinding struct {
	// Start starts a UCX worker and its progress engine for cfg,
	// delivering to h; it fails with Unsupported in a build without UCX.
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

// errNoUCX is Unsupported until SetUCX is called.
var errNoUCX = errors.New("ucxnet: built without cgo/UCX support")

// ucx is the UCX the session runs on: none until SetUCX.
var ucx = UCXBinding{
	Start:          func(Config, engine.Handler) (engine.Engine, error) { return nil, errNoUCX },
	Unsupported:    errNoUCX,
	IsUCX:          func(engine.Engine) bool { return false },
	Library:        func() UCXLibrary { return UCXLibrary{} },
	Offer:          func([]byte) (AddressOffer, error) { return AddressOffer{}, errNoUCX },
	AddressRelease: func([]byte) string { return "" },
	ValidAddress:   func([]byte) bool { return false },
}

// SetUCX makes u the UCX the session runs on. It is called once, when the
// program is initialised (package ucxnet's init), before any transport
// starts and before UCX is first called.
func SetUCX(u UCXBinding) { ucx = u }

// startUCX starts a UCX worker and its progress engine for cfg,
// delivering to h; it fails with ucx.Unsupported in a build without UCX.
func startUCX(cfg Config, h engine.Handler) (engine.Engine, error) { return ucx.Start(cfg, h) }

// isUCX reports whether eng is a UCX progress engine.
func isUCX(eng engine.Engine) bool { return ucx.IsUCX(eng) }

// loadedUCX describes the UCX library loaded (UCX finds it once).
func loadedUCX() UCXLibrary { return ucx.Library() }

// offerOf reads what a packed worker address offers; it fails for an
// address this build cannot read.
func offerOf(addr []byte) (AddressOffer, error) { return ucx.Offer(addr) }

// addressRelease is the UCX release a packed worker address names
// ("1.18"), "" if it names none (releases before 1.16) or is not one.
func addressRelease(addr []byte) string { return ucx.AddressRelease(addr) }

// stripSharedMemory is ucx.StripSharedMemory, or addr as it is where the
// binding has none.
func stripSharedMemory(addr []byte) ([]byte, error) {
	if ucx.StripSharedMemory == nil {
		return addr, nil
	}
	return ucx.StripSharedMemory(addr)
}

// validAddress reports whether addr is a packed worker address this build
// would hand to UCX.
func validAddress(addr []byte) bool { return ucx.ValidAddress(addr) }

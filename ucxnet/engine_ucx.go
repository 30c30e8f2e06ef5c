package ucxnet

// The one file of ucxnet that reaches the UCX progress engine
// (internal/progress): the binding NewTransport hands the session
// (internal/session, which imports no cgo package): starting the engine,
// telling it from the other engines (the in-memory one of tests, the
// session's noUCX), and what it reads of the UCX library and of packed
// worker addresses.

import (
	"sync"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/progress"
	"github.com/ucxnet/ucxnet/internal/session"
	"github.com/ucxnet/ucxnet/internal/ucxconf"
)

// ErrUnsupported means this build of ucxnet has no UCX: it was built
// without cgo (CGO_ENABLED=0) or for an OS other than Linux. Such a
// build's transports run the kernel-TCP lane alone (Listen and Dial work;
// see Config.Lane); NewTransport fails with it only when the UCX lane is
// forced.
var ErrUnsupported = progress.ErrUnsupported

// ucxBinding is what a transport uses of UCX: the progress engine and the
// library loaded. The session starts engines with start unless it is nil.
func ucxBinding(start session.StartEngine) session.UCXBinding {
	if start == nil {
		start = startUCX
	}
	return session.UCXBinding{
		Start:       start,
		Unsupported: ErrUnsupported,
		IsUCX: func(eng engine.Engine) bool {
			_, ok := eng.(*progress.Engine)
			return ok
		},
		Library: ucxLibrary,
		Offer: func(addr []byte) (session.AddressOffer, error) {
			o, err := progress.Offer(addr)
			return session.AddressOffer(o), err
		},
		AddressRelease:    progress.AddressRelease,
		ValidAddress:      progress.ValidAddress,
		StripSharedMemory: progress.StripSharedMemory,
	}
}

// ucxLibrary finds the library once: it cannot change in a process, and
// finding its path reads /proc/self/maps.
var ucxLibrary = sync.OnceValue(func() session.UCXLibrary {
	return session.UCXLibrary{Version: progress.Version(), BuiltFor: progress.BuildRelease(), Path: progress.LibraryPath()}
})

// startUCX starts a UCX worker and its progress engine for cfg,
// delivering to h; it fails with ErrUnsupported in a build without UCX.
func startUCX(cfg session.Config, h engine.Handler) (engine.Engine, error) {
	eng, err := progress.Start(progress.Config{Settings: ucxSettings(cfg.UCX), Spin: cfg.Spin, SpinMax: cfg.SpinMax}, h)
	if err != nil {
		return nil, err
	}
	return eng, nil
}

// ucxSettings is the UCX settings ucxnet applies with user's (a
// Config.UCX map) on top of the environment.
func ucxSettings(user map[string]string) []progress.Setting {
	var out []progress.Setting
	for _, s := range ucxconf.Settings(user, UCX().Version) {
		out = append(out, progress.Setting{Name: s.Name, Value: s.Value})
	}
	return out
}

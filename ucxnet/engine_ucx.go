package ucxnet

// The one file of ucxnet that reaches the UCX progress engine
// (internal/progress): it hands the session (internal/session, which
// imports no cgo package) what it needs of UCX: starting the engine,
// telling it from the other engines (the in-memory one of tests, the
// session's noUCX), and what it reads of the UCX library and of packed
// worker addresses.

import (
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

func init() {
	session.SetUCX(session.UCXBinding{
		Start:       startUCX,
		Unsupported: ErrUnsupported,
		IsUCX: func(eng engine.Engine) bool {
			_, ok := eng.(*progress.Engine)
			return ok
		},
		Library: func() session.UCXLibrary {
			return session.UCXLibrary{Version: progress.Version(), BuiltFor: progress.BuildRelease(), Path: progress.LibraryPath()}
		},
		Offer: func(addr []byte) (session.AddressOffer, error) {
			o, err := progress.Offer(addr)
			return session.AddressOffer(o), err
		},
		AddressRelease:    progress.AddressRelease,
		ValidAddress:      progress.ValidAddress,
		StripSharedMemory: progress.StripSharedMemory,
	})
}

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

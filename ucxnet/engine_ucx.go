package ucxnet

// The one file of ucxnet that reaches the UCX progress engine
// (internal/progress): starting it, telling it from the other engines
// (the in-memory one of tests, noUCX), and what it reads of the UCX
// library and of packed worker addresses. The rest of ucxnet sees engines
// through internal/engine.

import (
	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/progress"
	"github.com/ucxnet/ucxnet/internal/ucxconf"
)

// ErrUnsupported means this build of ucxnet has no UCX: it was built
// without cgo (CGO_ENABLED=0) or for an OS other than Linux. Such a
// build's transports run the kernel-TCP lane alone (Listen and Dial work;
// see Config.Lane); NewTransport fails with it only when the UCX lane is
// forced.
var ErrUnsupported = progress.ErrUnsupported

// startUCX starts a UCX worker and its progress engine for cfg,
// delivering to h; it fails with ErrUnsupported in a build without UCX.
func startUCX(cfg Config, h engine.Handler) (engine.Engine, error) {
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

// isUCX reports whether eng is a UCX progress engine.
func isUCX(eng engine.Engine) bool {
	_, ok := eng.(*progress.Engine)
	return ok
}

// loadedUCX describes the UCX library loaded (UCX finds it once).
func loadedUCX() UCXLibrary {
	return UCXLibrary{Version: progress.Version(), BuiltFor: progress.BuildRelease(), Path: progress.LibraryPath()}
}

// addressOffer is what a packed worker address offers a peer, by the
// transports it names.
type addressOffer = progress.AddressOffer

// offerOf reads what a packed worker address offers; it fails for an
// address this build cannot read.
func offerOf(addr []byte) (addressOffer, error) { return progress.Offer(addr) }

// addressRelease is the UCX release a packed worker address names
// ("1.18"), "" if it names none (releases before 1.16) or is not one.
func addressRelease(addr []byte) string { return progress.AddressRelease(addr) }

// validAddress reports whether addr is a packed worker address this build
// would hand to UCX.
func validAddress(addr []byte) bool { return progress.ValidAddress(addr) }

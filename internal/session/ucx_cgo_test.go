//go:build cgo

package session

// The tests' UCX: the progress engine, bound as package ucxnet binds it
// (ucxnet/engine_ucx.go), which the session's tests cannot import.
// Without cgo the tests run with no UCX (ucx_nocgo_test.go).

import (
	"sync"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/progress"
	"github.com/ucxnet/ucxnet/internal/ucxconf"
)

// testUCX is the UCX binding the tests' transports run on.
var testUCX = UCXBinding{
	Start: func(cfg Config, h engine.Handler) (engine.Engine, error) {
		var settings []progress.Setting
		for _, s := range ucxconf.Settings(cfg.UCX, testLib().Version) {
			settings = append(settings, progress.Setting{Name: s.Name, Value: s.Value})
		}
		eng, err := progress.Start(progress.Config{Settings: settings, Spin: cfg.Spin, SpinMax: cfg.SpinMax}, h)
		if err != nil {
			return nil, err
		}
		return eng, nil
	},
	Unsupported: progress.ErrUnsupported,
	IsUCX: func(eng engine.Engine) bool {
		_, ok := eng.(*progress.Engine)
		return ok
	},
	Library: func() UCXLibrary { return testLib() },
	Offer: func(addr []byte) (AddressOffer, error) {
		o, err := progress.Offer(addr)
		return AddressOffer(o), err
	},
	AddressRelease:    progress.AddressRelease,
	ValidAddress:      progress.ValidAddress,
	StripSharedMemory: progress.StripSharedMemory,
}

// testLib is the UCX library loaded, found once.
var testLib = sync.OnceValue(func() UCXLibrary {
	return UCXLibrary{Version: progress.Version(), BuiltFor: progress.BuildRelease(), Path: progress.LibraryPath()}
})

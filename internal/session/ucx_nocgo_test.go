//go:build !cgo

package session

// Without cgo the tests run with no UCX: engines fail to start with
// errNoUCX, and packed worker addresses are read as ucxnet reads them in
// a build without cgo (the address walk is pure Go: internal/cucx, whose
// stub builds without cgo).

import (
	"errors"

	"github.com/ucxnet/ucxnet/internal/cucx"
	"github.com/ucxnet/ucxnet/internal/engine"
)

// errNoUCX is the tests' binding's Unsupported.
var errNoUCX = errors.New("ucxnet: built without cgo/UCX support")

// testUCX is the UCX binding the tests' transports run on: none.
var testUCX = UCXBinding{
	Start:          func(Config, engine.Handler) (engine.Engine, error) { return nil, errNoUCX },
	Unsupported:    errNoUCX,
	IsUCX:          func(engine.Engine) bool { return false },
	Library:        testLib,
	Offer:          func([]byte) (AddressOffer, error) { return AddressOffer{}, errNoUCX },
	AddressRelease: cucx.AddressRelease,
	ValidAddress:   func(addr []byte) bool { return cucx.ValidateAddress(addr) == nil },
}

// testLib is the UCX library loaded: none.
func testLib() UCXLibrary { return UCXLibrary{} }

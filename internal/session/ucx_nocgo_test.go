//go:build !cgo

package session

// Without cgo the tests run with no UCX (the session's own binding), and
// read packed worker addresses as ucxnet does in a build without cgo: the
// address walk is pure Go (internal/cucx, whose stub builds without cgo).

import "github.com/ucxnet/ucxnet/internal/cucx"

func init() {
	b := ucx
	b.AddressRelease = cucx.AddressRelease
	b.ValidAddress = func(addr []byte) bool { return cucx.ValidateAddress(addr) == nil }
	SetUCX(b)
}

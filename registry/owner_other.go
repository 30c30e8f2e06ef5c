//go:build !linux

package registry

import (
	"errors"
	"net/netip"
)

// socketOwner is unsupported outside Linux: the default token is not sent
// to a loopback registry there (see [ErrForeignRegistry]).
func socketOwner(local, remote netip.AddrPort) (int, error) {
	return 0, errors.ErrUnsupported
}

//go:build !linux

package statsock

import (
	"errors"
	"net"
)

// Supported says whether this platform serves: not off Linux, where
// PeerCred cannot tell who is at the other end.
const Supported = false

// PeerCred returns errors.ErrUnsupported off Linux.
func PeerCred(*net.UnixConn) (uid, pid int, err error) {
	return 0, 0, errors.ErrUnsupported
}

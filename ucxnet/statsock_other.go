//go:build !linux

package ucxnet

import (
	"errors"
	"net"
)

// statsSupported says whether transports serve a stats socket here: not
// off Linux, where peerCred cannot tell who is at the other end.
const statsSupported = false

// peerCred cannot tell off Linux.
func peerCred(*net.UnixConn) (uid, pid int, err error) {
	return 0, 0, errors.ErrUnsupported
}

// PeerCred returns the uid and pid of the process at the other end of a
// Unix socket connection; off Linux it returns errors.ErrUnsupported.
func PeerCred(c *net.UnixConn) (uid, pid int, err error) { return peerCred(c) }

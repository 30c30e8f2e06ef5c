package ucxnet

import (
	"net"

	"golang.org/x/sys/unix"
)

// statsSupported says whether transports serve a stats socket here: on
// Linux, where peerCred tells who is at the other end.
const statsSupported = true

// peerCred returns the uid and pid of the process at the other end of c
// (SO_PEERCRED: as of its connect or listen).
func peerCred(c *net.UnixConn) (uid, pid int, err error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Ucred
	cerr := rc.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if cerr != nil {
		return 0, 0, cerr
	}
	if err != nil {
		return 0, 0, err
	}
	return int(cred.Uid), int(cred.Pid), nil
}

// PeerCred returns the uid and pid of the process at the other end of a
// Unix socket connection (for `ucxnet ls`, which checks who answers).
func PeerCred(c *net.UnixConn) (uid, pid int, err error) { return peerCred(c) }

package statsock

import (
	"net"

	"golang.org/x/sys/unix"
)

// Supported says whether this platform serves: on Linux, where PeerCred
// tells who is at the other end.
const Supported = true

// PeerCred returns the uid and pid of the process at the other end of c
// (SO_PEERCRED: as of its connect or listen).
func PeerCred(c *net.UnixConn) (uid, pid int, err error) {
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

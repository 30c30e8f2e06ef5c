package ucxnet

import (
	"net"

	"golang.org/x/sys/unix"
)

// tcpClosed reports whether tc's connection ended abnormally: state
// TCP_CLOSE, which an orderly end (the peer's FIN: CLOSE_WAIT, TIME_WAIT,
// ...) never reaches while the socket is open, but a reset or a kernel
// timeout does.
func tcpClosed(tc *net.TCPConn) bool {
	rc, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	_ = rc.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			closed = info.State == unix.BPF_TCP_CLOSE
		}
	})
	return closed
}

package ucxnet

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// setUserTimeout sets TCP_USER_TIMEOUT: how long sent data may stay
// unacknowledged (keepalive probes included) before the kernel gives the
// connection up.
func setUserTimeout(tc *net.TCPConn, d time.Duration) {
	rc, err := tc.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
	})
}

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

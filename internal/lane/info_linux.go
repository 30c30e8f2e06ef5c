package lane

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Info returns tc's round trip, the kernel's minimum over its recent
// samples (tcpi_min_rtt), and whether its connection
// ended abnormally: state TCP_CLOSE, which an orderly end (the peer's FIN:
// CLOSE_WAIT, TIME_WAIT, ...) never reaches while the socket is open, but a
// reset or a kernel timeout does. Zero and false if the kernel does not
// say. The minimum, not the smoothed estimate: the side whose data the peer
// answers with delayed ACKs (the accepting side of a request-reply conn)
// would have its smoothed estimate inflated by the peer's ACK delay
// (milliseconds), not by the path; both ends see the same path.
func Info(tc *net.TCPConn) (rtt time.Duration, closed bool) {
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0, false
	}
	_ = rc.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			rtt, closed = time.Duration(info.Min_rtt)*time.Microsecond, info.State == unix.BPF_TCP_CLOSE
		}
	})
	return rtt, closed
}

// Unread returns how many bytes tc's receive queue holds that no Read
// has taken (0 if the kernel does not say).
func Unread(tc *net.TCPConn) int {
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = rc.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ); err == nil {
			n = v
		}
	})
	return n
}

// deferAccept is a listening socket's Control: TCP_DEFER_ACCEPT, so that
// the kernel hands a connection to Accept only once its first bytes came
// (or after about DeferAccept): a silent connection takes no preamble
// place meanwhile, and an honest one, whose hello comes at once, is never
// idle while it has one.
func deferAccept(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT, int(DeferAccept/time.Second))
	})
	if err != nil {
		return err
	}
	return serr
}

// HelloCame reports whether tc's receive queue holds a whole dialer's
// hello (as its fixed part says), without reading it.
func HelloCame(tc *net.TCPConn) bool {
	rc, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	var fix [HelloFixed]byte
	n := 0
	_ = rc.Control(func(fd uintptr) {
		n, _, _ = unix.Recvfrom(int(fd), fix[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	})
	need, ok := helloLen(fix[:max(n, 0)])
	return ok && Unread(tc) >= need
}

package lane

import (
	"net"
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

package lane

// The payload counts of a lane conn as the kernel keeps them, so that
// every path counts: Read and Write, and the sendfile and splice that
// ReadFrom and WriteTo hand to the kernel.

import (
	"net"

	"golang.org/x/sys/unix"
)

// tcpInfo calls f with tc's TCP_INFO and the fd; false if the kernel does
// not say (the socket is closed).
func tcpInfo(tc *net.TCPConn, f func(fd int, info *unix.TCPInfo)) bool {
	rc, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	_ = rc.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			f(int(fd), info)
			ok = true
		}
	})
	return ok
}

// kernelBytes returns the bytes received from the peer (read or not) and
// the bytes written to the socket (sent once, or waiting to be sent). The
// kernel counts the peer's FIN as a received byte: a state the FIN leads
// to takes it off (TCP_CLOSE also follows a reset, which has no FIN: such
// conn's count is one short).
func kernelBytes(info *unix.TCPInfo) (in, out uint64) {
	in = info.Bytes_received
	switch info.State {
	case unix.BPF_TCP_CLOSE_WAIT, unix.BPF_TCP_LAST_ACK, unix.BPF_TCP_CLOSING, unix.BPF_TCP_TIME_WAIT, unix.BPF_TCP_CLOSE:
		in = max(in, 1) - 1
	}
	return in, info.Bytes_sent - info.Bytes_retrans + uint64(info.Notsent_bytes)
}

// Established records the kernel's counts once the preamble is done, so
// that Bytes counts the payload only. Received bytes not yet read are
// payload (the preamble reads exactly its own bytes): the count and the
// receive queue are read until a count that did not move brackets the
// queue's length.
func (c *Conn) Established() {
	for range 8 {
		var r1, out uint64
		var inq int
		if !tcpInfo(c.TC, func(fd int, info *unix.TCPInfo) {
			r1, out = kernelBytes(info)
			inq, _ = unix.IoctlGetInt(fd, unix.TIOCINQ)
		}) {
			return
		}
		var r2 uint64
		tcpInfo(c.TC, func(_ int, info *unix.TCPInfo) { r2, _ = kernelBytes(info) })
		if r1 == r2 && uint64(inq) <= r1 {
			c.base.in, c.base.out = r1-uint64(inq), out
			c.base.ok.Store(true)
			return
		}
	}
}

// Bytes returns the payload bytes received from the peer (read or not)
// and written to the connection since Established, as the kernel counts
// them; false if it does not say (the socket is closed, or Established
// could not tell).
func (c *Conn) Bytes() (in, out uint64, ok bool) {
	if !c.base.ok.Load() {
		return 0, 0, false
	}
	ok = tcpInfo(c.TC, func(_ int, info *unix.TCPInfo) { in, out = kernelBytes(info) })
	return in - c.base.in, out - c.base.out, ok
}

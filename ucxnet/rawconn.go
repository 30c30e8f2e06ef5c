package ucxnet

import (
	"errors"
	"net"
	"syscall"
)

// The options of *net.TCPConn that a Conn has, per lane: on the
// kernel-TCP lane they are its socket's; on the UCX lane there is no
// socket of the conn's own.

// SetNoDelay is (*net.TCPConn).SetNoDelay on the kernel-TCP lane (Go's
// default there is no delay, as for every TCP conn). On the UCX lane it
// does nothing and returns nil: there is no Nagle delay to turn off, each
// Write is handed to UCX at once (a small write that finds the transport
// busy is coalesced into the conn's open frame, sent within microseconds).
func (c *Conn) SetNoDelay(noDelay bool) error {
	if tc := c.s.LaneSocket(); tc != nil {
		return c.opErr("set", unwrapOp(tc.SetNoDelay(noDelay)))
	}
	return nil
}

// SetReadBuffer sets the socket's receive buffer on the kernel-TCP lane,
// as (*net.TCPConn).SetReadBuffer does. On the UCX lane it does nothing
// and returns nil: what a peer may send ahead is the receive window,
// Config.Window, set per Transport.
func (c *Conn) SetReadBuffer(bytes int) error {
	if tc := c.s.LaneSocket(); tc != nil {
		return c.opErr("set", unwrapOp(tc.SetReadBuffer(bytes)))
	}
	return nil
}

// SetWriteBuffer sets the socket's send buffer on the kernel-TCP lane,
// as (*net.TCPConn).SetWriteBuffer does. On the UCX lane it does nothing
// and returns nil: Write's buffering is bounded by the peer's receive
// window and UCX's own (see Write).
func (c *Conn) SetWriteBuffer(bytes int) error {
	if tc := c.s.LaneSocket(); tc != nil {
		return c.opErr("set", unwrapOp(tc.SetWriteBuffer(bytes)))
	}
	return nil
}

// SyscallConn returns a syscall.RawConn, as (*net.TCPConn).SyscallConn
// does. On the kernel-TCP lane it is the TCP socket's. A conn on the UCX
// lane has no file descriptor of its own (its bytes arrive as active
// messages on a worker that many conns share), so it gives what a
// connection pool's health check needs and nothing more: Read calls f
// once with one end of a non-blocking Unix socket pair (read or recv
// with MSG_PEEK work on it), which holds one byte (not the conn's data)
// when data waits to be read, is at EOF when the peer closed or reset the
// conn (or it was closed here), and is empty (EAGAIN) otherwise; this is
// what go-redis's pool peeks at to drop a conn the server closed while it
// sat idle. The descriptor is f's to read during the call only (the empty
// one is shared: f must not write to it or close it). Control and Write
// return an error matching errors.ErrUnsupported.
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	if tc := c.s.LaneSocket(); tc != nil {
		rc, err := tc.SyscallConn()
		return rc, c.opErr("raw-conn", unwrapOp(err))
	}
	return readiness{c}, nil
}

// unwrapOp returns the error inside a *net.OpError (opErr wraps it again
// with the conn's addresses).
func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Err
	}
	return err
}

// readiness is a UCX-lane conn's RawConn: Read's descriptor tells whether
// a Read would block.
type readiness struct{ c *Conn }

var errNoDescriptor = errors.Join(errors.ErrUnsupported,
	errors.New("a conn on the UCX lane has no file descriptor (SyscallConn's Read tells readiness only)"))

func (r readiness) Control(func(fd uintptr)) error {
	return r.c.opErr("raw-control", errNoDescriptor)
}

func (r readiness) Write(func(fd uintptr) bool) error {
	return r.c.opErr("raw-write", errNoDescriptor)
}

func (r readiness) Read(f func(fd uintptr) bool) error {
	data, ended := r.c.s.ReadState()
	if r.c.s.Closed() {
		data, ended = false, true
	}
	return r.c.opErr("raw-read", readinessFD(data, ended, f))
}

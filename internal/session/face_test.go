package session

// The session's tests reach its streams through this minimal face, as
// applications reach them through ucxnet's: net.Conn with deadlines (the
// deadline package) and *net.OpError, net.Listener, and the Dialer's and
// the package's Dial and Listen.

import (
	"context"
	"io"
	"net"
	"time"

	"github.com/ucxnet/ucxnet/internal/deadline"
	"github.com/ucxnet/ucxnet/registry"
)

// testConn is a stream as a net.Conn.
type testConn struct {
	*Conn
	rd, wd deadline.Deadline
}

func wrap(c *Conn) *testConn {
	return &testConn{Conn: c, rd: deadline.Make(), wd: deadline.Make()}
}

func (c *testConn) opErr(op string, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return &net.OpError{Op: op, Net: Network, Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

func (c *testConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b, &c.rd)
	return n, c.opErr("read", err)
}

func (c *testConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b, &c.wd)
	return n, c.opErr("write", err)
}

func (c *testConn) Close() error      { return c.opErr("close", c.Conn.Close()) }
func (c *testConn) CloseWrite() error { return c.opErr("close", c.Conn.CloseWrite()) }
func (c *testConn) SetLinger(sec int) error {
	return c.opErr("set", c.Conn.SetLinger(sec))
}

func (c *testConn) setDeadline(which string, t time.Time) error {
	if c.OnLane() {
		return c.opErr("set", c.SetLaneDeadline(which, t))
	}
	if c.Closed() {
		return c.opErr("set", net.ErrClosed)
	}
	if which != "write" {
		c.rd.Set(t)
	}
	if which != "read" {
		c.wd.Set(t)
	}
	return nil
}

func (c *testConn) SetDeadline(t time.Time) error      { return c.setDeadline("", t) }
func (c *testConn) SetReadDeadline(t time.Time) error  { return c.setDeadline("read", t) }
func (c *testConn) SetWriteDeadline(t time.Time) error { return c.setDeadline("write", t) }

// Accept is AcceptStream as net.Listener's, its error wrapped as
// ucxnet's Listener wraps it.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.AcceptStream(nil)
	if err != nil {
		return nil, &net.OpError{Op: "accept", Net: Network, Addr: l.Addr(), Err: err}
	}
	return wrap(c), nil
}

// checkNetwork accepts the networks ucxnet's Dial and Listen take.
func checkNetwork(network string) error {
	switch network {
	case Network, "tcp", "tcp4", "tcp6":
		return nil
	}
	return net.UnknownNetworkError(network)
}

// Dial is DialStream as a net.Conn.
func (d *Dialer) Dial(network, address string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, address)
}

// DialContext is DialStream as a net.Conn, its errors wrapped as ucxnet's
// Dialer wraps them.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	raddr := Addr{Name: address}
	if err := checkNetwork(network); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: raddr, Err: err}
	}
	c, err := d.DialStream(ctx, address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: Network, Addr: raddr, Err: err}
	}
	return wrap(c), nil
}

// Dial dials on the default transport.
func Dial(network, address string) (net.Conn, error) {
	var d Dialer
	return d.Dial(network, address)
}

// Listen listens on the default transport, its errors wrapped as
// ucxnet's Listen wraps them.
func Listen(network, name string) (net.Listener, error) {
	if err := checkNetwork(network); err != nil {
		return nil, &net.OpError{Op: "listen", Net: network, Err: err}
	}
	if name == "" {
		name = registry.UniqueName()
	}
	var lc ListenConfig
	l, err := lc.Listen(context.Background(), name)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: Network, Addr: Addr{Name: name}, Err: err}
	}
	return l, nil
}

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

	"github.com/ucxnet/ucxnet/registry"
)

// testConn is a stream as a net.Conn. Conn is the UCX stream, for the
// tests that look inside one; nil on the kernel-TCP lane.
type testConn struct {
	s Stream
	*Conn
}

func wrap(s Stream) *testConn {
	c, _ := s.(*Conn)
	return &testConn{s: s, Conn: c}
}

func (c *testConn) opErr(op string, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return &net.OpError{Op: op, Net: Network, Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

func (c *testConn) Read(b []byte) (int, error) {
	n, err := c.s.Read(b)
	return n, c.opErr("read", err)
}

func (c *testConn) Write(b []byte) (int, error) {
	n, err := c.s.Write(b)
	return n, c.opErr("write", err)
}

func (c *testConn) Close() error      { return c.opErr("close", c.s.Close()) }
func (c *testConn) CloseWrite() error { return c.opErr("close", c.s.CloseWrite()) }
func (c *testConn) SetLinger(sec int) error {
	return c.opErr("set", c.s.SetLinger(sec))
}
func (c *testConn) SetDeadline(t time.Time) error { return c.opErr("set", c.s.SetDeadline(t)) }
func (c *testConn) SetReadDeadline(t time.Time) error {
	return c.opErr("set", c.s.SetReadDeadline(t))
}
func (c *testConn) SetWriteDeadline(t time.Time) error {
	return c.opErr("set", c.s.SetWriteDeadline(t))
}
func (c *testConn) SetKeepAlive(on bool) error { return c.s.SetKeepAlive(on) }
func (c *testConn) SetKeepAliveConfig(cfg net.KeepAliveConfig) error {
	return c.s.SetKeepAliveConfig(cfg)
}
func (c *testConn) LocalAddr() net.Addr           { return c.s.LocalAddr() }
func (c *testConn) RemoteAddr() net.Addr          { return c.s.RemoteAddr() }
func (c *testConn) Closed() bool                  { return c.s.Closed() }
func (c *testConn) Stats() ConnStats              { return c.s.Stats() }
func (c *testConn) Lane() (name, reason string)   { return c.s.Lane() }
func (c *testConn) Transports() []string          { return c.s.Transports() }
func (c *testConn) ReadState() (data, ended bool) { return c.s.ReadState() }
func (c *testConn) LaneSocket() *net.TCPConn      { return c.s.LaneSocket() }

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
	sd := *d
	if sd.Transport == nil {
		dt, err := DefaultTransport()
		if err != nil {
			return nil, &net.OpError{Op: "dial", Net: Network, Addr: raddr, Err: err}
		}
		sd.Transport = dt
	}
	c, err := sd.DialStream(ctx, address)
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
	dt, err := DefaultTransport()
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: Network, Addr: Addr{Name: name}, Err: err}
	}
	lc := ListenConfig{Transport: dt}
	l, err := lc.Listen(context.Background(), name)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: Network, Addr: Addr{Name: name}, Err: err}
	}
	return l, nil
}

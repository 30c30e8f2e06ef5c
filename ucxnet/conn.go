package ucxnet

import (
	"io"
	"net"
	"time"

	"github.com/ucxnet/ucxnet/internal/session"
)

// Conn is a ucxnet connection: a byte stream carried as UCX active
// messages, or over a kernel TCP connection (the TCP lane; see
// Config.Lane). It implements net.Conn and, like *net.TCPConn,
// CloseWrite, SetLinger, ReadFrom, WriteTo, SetNoDelay, SetReadBuffer,
// SetWriteBuffer and SyscallConn (rawconn.go: what each does per lane).
// Its errors are
// *net.OpError (Net "ucx", Source its LocalAddr, Addr its RemoteAddr),
// except io.EOF. All methods are safe for concurrent use.
type Conn struct {
	s session.Stream
}

// newConn returns the face of stream s.
func newConn(s session.Stream) *Conn { return &Conn{s: s} }

// opErr wraps a session error in a *net.OpError; nil and io.EOF stay.
func (c *Conn) opErr(op string, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return &net.OpError{Op: op, Net: Network, Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// Read reads data from the conn. After the peer's Close or CloseWrite and
// once everything it sent is read, Read returns io.EOF.
func (c *Conn) Read(b []byte) (int, error) {
	n, err := c.s.Read(b)
	return n, c.opErr("read", err)
}

// Write writes data to the conn. It returns once all of b is committed and
// nothing holds b any more — taken by UCX inline, copied into buffers that
// the send owns until it completes, (over shared memory, for ZeroCopyMin
// bytes or more) sent straight from b, pinned until UCX reports it sent,
// or (a small write that finds the transport busy or backed up) copied
// into the conn's open frame, which the transport sends within
// microseconds, coalesced with the writes that follow: b may be reused at
// once. On an error, n says how many bytes were committed (on a reset
// conn, at least that many may have reached the peer). Write blocks while
// the peer's receive window is full, and while UCX holds more than it
// could send to the peer (its shared-memory FIFO or socket full: 1 MiB of
// small writes over shared memory, 8 MiB over TCP, or 32 MiB to all peers
// of the conn's worker), as a write to a full socket buffer does; the
// deadline is checked before each part is committed.
func (c *Conn) Write(b []byte) (int, error) {
	n, err := c.s.Write(b)
	return n, c.opErr("write", err)
}

// Close closes the conn. Data already written is delivered, then FIN: the
// peer reads everything, then io.EOF. If data the peer sent is still
// unread, or SetLinger(0) was called, the peer is reset instead (as TCP
// does). Blocked Read and Write calls return net.ErrClosed.
func (c *Conn) Close() error { return c.opErr("close", c.s.Close()) }

// CloseWrite shuts down the writing side: the peer reads what was written,
// then io.EOF. Reading goes on.
func (c *Conn) CloseWrite() error { return c.opErr("close", c.s.CloseWrite()) }

// SetLinger sets how Close treats data not yet handed to the transport,
// as (*net.TCPConn).SetLinger does. sec < 0 (the default): Close sends what
// was written, then FIN, waiting up to the Transport's Linger for UCX to
// hand it on. sec == 0: Close discards it and resets the conn — the peer
// sees ECONNRESET, not EOF (a proxy passes on a reset this way). sec > 0:
// as the default, waiting up to sec seconds.
func (c *Conn) SetLinger(sec int) error { return c.opErr("set", c.s.SetLinger(sec)) }

// SetKeepAlive turns keepalives on (with DefaultKeepAlive and
// DefaultKeepAliveCount) or off for the conn, as
// (*net.TCPConn).SetKeepAlive does (see Config.KeepAlive). Keepalives are
// judged per peer, by the tightest of its conns'.
func (c *Conn) SetKeepAlive(on bool) error { return c.opErr("set", c.s.SetKeepAlive(on)) }

// SetKeepAliveConfig sets the conn's keepalive, as
// (*net.TCPConn).SetKeepAliveConfig does: probes after Idle of silence,
// every Interval, and the peer failed after Count unanswered ones; a zero
// or negative field takes its default. On the kernel-TCP lane it sets the
// socket's.
func (c *Conn) SetKeepAliveConfig(cfg net.KeepAliveConfig) error {
	return c.opErr("set", c.s.SetKeepAliveConfig(cfg))
}

// SetDeadline sets the read and write deadlines. After Close it returns
// an error matching net.ErrClosed, as *net.TCPConn's does.
func (c *Conn) SetDeadline(t time.Time) error { return c.opErr("set", c.s.SetDeadline(t)) }

// SetReadDeadline sets the read deadline; it also interrupts a Read
// already blocked.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.opErr("set", c.s.SetReadDeadline(t)) }

// SetWriteDeadline sets the write deadline.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.opErr("set", c.s.SetWriteDeadline(t)) }

// LocalAddr returns the local address: the listener's name for an accepted
// conn, the transport's name and conn id for a dialed one.
func (c *Conn) LocalAddr() net.Addr { return faceAddr(c.s.LocalAddr()) }

// RemoteAddr returns the remote address: the dialed name for a dialed
// conn, the dialer's transport name and conn id for an accepted one.
func (c *Conn) RemoteAddr() net.Addr { return faceAddr(c.s.RemoteAddr()) }

// Stats returns a snapshot of the conn's statistics. It takes the conn's
// lock briefly and never blocks on the network.
func (c *Conn) Stats() ConnStats { return ConnStats(c.s.Stats()) }

// Lane returns the lane the conn runs on — "ucx" or "tcp" (a kernel TCP
// connection) — and why it was chosen, e.g. "kernel tcp: no UCX transport
// better than tcp to this peer" or "same host: shared memory".
func (c *Conn) Lane() (name, reason string) { return c.s.Lane() }

// Transports returns the UCX transports and devices carrying the conn's
// endpoint, e.g. ["posix/memory", "cma/memory"] or ["tcp/lo"] or
// ["rc_mlx5/mlx5_0:1"]: the answer to "am I on RDMA?". A conn on the TCP
// lane returns ["tcp(kernel)"].
func (c *Conn) Transports() []string { return c.s.Transports() }

// ReadFrom copies r to the conn until EOF. On the TCP lane it is
// (*net.TCPConn).ReadFrom, so io.Copy from a file or socket keeps
// sendfile and splice; on the UCX lane, a plain copy.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.s.(io.ReaderFrom); ok {
		n, err := rf.ReadFrom(r)
		return n, c.opErr("readfrom", err)
	}
	return io.Copy(writerOnly{c}, r)
}

// WriteTo copies the conn to w until EOF. On the TCP lane it is
// (*net.TCPConn).WriteTo (splice to a socket or pipe); on the UCX lane, a
// plain copy.
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	if wt, ok := c.s.(io.WriterTo); ok {
		n, err := wt.WriteTo(w)
		return n, c.opErr("writeto", err)
	}
	return io.Copy(w, readerOnly{c})
}

// writerOnly and readerOnly hide a Conn's ReadFrom and WriteTo from
// io.Copy (which would call them back).
type writerOnly struct{ io.Writer }
type readerOnly struct{ io.Reader }

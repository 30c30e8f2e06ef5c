package lane

// The kernel-TCP lane's conn side: a conn's TCP connection, how it tells
// a failure from an orderly end, the dial to a listener's endpoints, and
// the lane's counters.

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrAbnormal is the error of a Read or Write on a connection that ended
// abnormally (reset, keepalive or TCP_USER_TIMEOUT) after the kernel gave
// that failure to another call.
var ErrAbnormal = errors.New("connection ended abnormally (kernel tcp)")

// Conn is a conn's kernel TCP connection.
type Conn struct {
	TC    *net.TCPConn
	eof   atomic.Bool // a Read returned the peer's orderly EOF
	wshut atomic.Bool // CloseWrite was called
	base  struct {    // the kernel's counts when the preamble ended (Established)
		in, out uint64
		ok      atomic.Bool
	}
}

// CloseWrite shuts down the writing side.
func (c *Conn) CloseWrite() error {
	c.wshut.Store(true)
	return c.TC.CloseWrite()
}

// WriteShut reports whether CloseWrite was called.
func (c *Conn) WriteShut() bool { return c.wshut.Load() }

// EOF reports whether a Read returned the peer's orderly EOF.
func (c *Conn) EOF() bool { return c.eof.Load() }

// Failed reports whether the connection ended abnormally: the kernel closed
// it (TCP_CLOSE) while this side had not shut down writing (an orderly end
// keeps it in CLOSE_WAIT until then; after both FINs Linux closes the
// socket too, so then nothing can be told).
func (c *Conn) Failed() bool {
	if c.wshut.Load() {
		return false
	}
	_, closed := Info(c.TC)
	return closed
}

// Read reads from the TCP conn. The kernel reports a connection's failure
// to one call only: a Read that follows a Write that got it sees EOF. An
// EOF on a connection the kernel has closed (TCP_CLOSE) before any orderly
// EOF is that failure: ErrAbnormal.
func (c *Conn) Read(b []byte) (int, error) {
	n, err := c.TC.Read(b)
	if err == io.EOF && !c.eof.Load() {
		if c.Failed() {
			return n, ErrAbnormal
		}
		c.eof.Store(true)
	}
	return n, err
}

// Write writes to the TCP conn; EPIPE on a connection that failed (the
// error went to a Read) is ErrAbnormal.
func (c *Conn) Write(b []byte) (int, error) {
	n, err := c.TC.Write(b)
	if err != nil && errors.Is(err, syscall.EPIPE) && c.Failed() {
		return n, ErrAbnormal
	}
	return n, err
}

// SetDeadline sets the read ("read"), write ("write") or both ("")
// deadlines.
func (c *Conn) SetDeadline(what string, t time.Time) error {
	switch what {
	case "read":
		return c.TC.SetReadDeadline(t)
	case "write":
		return c.TC.SetWriteDeadline(t)
	}
	return c.TC.SetDeadline(t)
}

// DialEndpoints connects to the first of eps that answers, each given a
// share of ctx's time left (as net.Dialer does for a name's addresses: one
// that drops SYNs must not take it all). The error is ctx's once it is
// done, else the last endpoint's.
func DialEndpoints(ctx context.Context, eps []netip.AddrPort) (*net.TCPConn, error) {
	var lastErr error
	var d net.Dialer
	for i, ap := range eps {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if dl, ok := ctx.Deadline(); ok && i < len(eps)-1 {
			share := max(time.Until(dl)/time.Duration(len(eps)-i), 2*time.Second)
			actx, cancel = context.WithTimeout(ctx, share)
		}
		nc, err := d.DialContext(actx, "tcp", ap.String())
		cancel()
		if err == nil {
			return nc.(*net.TCPConn), nil
		}
		lastErr = err
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if lastErr == nil {
		lastErr = errors.New("no endpoint")
	}
	return nil, lastErr
}

// Counters are the lane's counts of preambles that failed.
type Counters struct {
	Garbage, Oversized, Timeouts, OverCap atomic.Uint64
}

// CountPreambleErr counts a failed preamble read.
func (k *Counters) CountPreambleErr(err error) {
	switch {
	case errors.Is(err, ErrGarbage):
		k.Garbage.Add(1)
	case errors.Is(err, ErrOversized):
		k.Oversized.Add(1)
	default:
		k.Timeouts.Add(1) // deadline, EOF or reset before the preamble was done
	}
}

// NewID is a random non-zero conn id.
func NewID() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
}

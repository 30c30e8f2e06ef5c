package ucxnet

// The conn side of the kernel-TCP lane: a *Conn whose lane is set
// delegates every method to its *net.TCPConn, with the errors of the
// standard library (addresses replaced by the conn's ucxnet ones), and
// the dialer's side of the preamble (tcplane.go).

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ucxnet/ucxnet/internal/auth"
	"github.com/ucxnet/ucxnet/internal/lane"
	"github.com/ucxnet/ucxnet/registry"
)

// tcpLane is a conn's kernel TCP connection.
type tcpLane struct {
	tc    *net.TCPConn
	eof   atomic.Bool // a Read returned the peer's orderly EOF
	wshut atomic.Bool // CloseWrite was called
}

// closeWrite shuts down the writing side.
func (tl *tcpLane) closeWrite(c *Conn) error {
	tl.wshut.Store(true)
	return c.mapErr(tl.tc.CloseWrite())
}

// failed reports whether the connection ended abnormally: the kernel closed
// it (TCP_CLOSE) while this side had not shut down writing (an orderly end
// keeps it in CLOSE_WAIT until then; after both FINs Linux closes the
// socket too, so then nothing can be told).
func (tl *tcpLane) failed() bool {
	if tl.wshut.Load() {
		return false
	}
	_, closed := lane.Info(tl.tc)
	return closed
}

// laneConns are a Transport's conns on the TCP lane and the lane's
// counters.
type laneConns struct {
	mu     sync.Mutex
	conns  map[*Conn]struct{}
	closed bool

	garbage, oversized, timeouts, overCap atomic.Uint64
}

// LaneStats are a Transport's kernel-TCP lane counters.
type LaneStats struct {
	OpenConns uint64 // conns on the TCP lane now
	// Garbage counts TCP conns closed because their first bytes were not
	// a ucxnet preamble (a port scanner, another protocol).
	Garbage uint64
	// Oversized counts preambles whose fields were out of bounds.
	Oversized uint64
	// Timeouts counts preambles not done within the handshake timeout
	// (or cut short by the dialer).
	Timeouts uint64
	// OverCap counts TCP conns closed at once because the listener
	// already had 64 conns in their preamble.
	OverCap uint64
}

// LaneStats returns the kernel-TCP lane's counters.
func (t *Transport) LaneStats() LaneStats {
	t.lanes.mu.Lock()
	n := len(t.lanes.conns)
	t.lanes.mu.Unlock()
	return LaneStats{OpenConns: uint64(n), Garbage: t.lanes.garbage.Load(), Oversized: t.lanes.oversized.Load(),
		Timeouts: t.lanes.timeouts.Load(), OverCap: t.lanes.overCap.Load()}
}

// countPreambleErr counts a failed preamble read.
func (lc *laneConns) countPreambleErr(err error) {
	switch {
	case errors.Is(err, lane.ErrGarbage):
		lc.garbage.Add(1)
	case errors.Is(err, lane.ErrOversized):
		lc.oversized.Add(1)
	default:
		lc.timeouts.Add(1) // deadline, EOF or reset before the preamble was done
	}
}

// newID is a random non-zero conn id.
func (lc *laneConns) newID() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
}

// add records a lane conn; false once the transport is closed.
func (lc *laneConns) add(c *Conn) bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.closed {
		return false
	}
	if lc.conns == nil {
		lc.conns = map[*Conn]struct{}{}
	}
	lc.conns[c] = struct{}{}
	return true
}

func (lc *laneConns) remove(c *Conn) {
	lc.mu.Lock()
	delete(lc.conns, c)
	lc.mu.Unlock()
}

// closeAll resets every lane conn (Transport.Close): their peers see
// ECONNRESET.
func (lc *laneConns) closeAll() {
	lc.mu.Lock()
	lc.closed = true
	cs := lc.conns
	lc.conns = nil
	lc.mu.Unlock()
	for c := range cs {
		lane.Reset(c.lane.tc)
	}
}

// newLaneConn returns a conn on the TCP lane over tc.
func newLaneConn(t *Transport, tc *net.TCPConn, laddr, raddr Addr, why string) *Conn {
	return &Conn{t: t, laddr: laddr, raddr: raddr, lane: &tcpLane{tc: tc}, laneWhy: why, born: time.Now()}
}

// dialTCP dials entry e over the TCP lane: the endpoints in order, then
// the preamble.
func (t *Transport) dialTCP(ctx context.Context, e registry.Entry, eps []netip.AddrPort, psk []byte, raddr Addr, why string, ka time.Duration) (*Conn, error) {
	var tc *net.TCPConn
	var lastErr error
	var d net.Dialer
	for i, ap := range eps {
		// Each endpoint gets a share of the time left (as net.Dialer
		// does for a name's addresses): one that drops SYNs must not
		// take it all.
		actx, cancel := ctx, context.CancelFunc(func() {})
		if dl, ok := ctx.Deadline(); ok && i < len(eps)-1 {
			share := max(time.Until(dl)/time.Duration(len(eps)-i), 2*time.Second)
			actx, cancel = context.WithTimeout(ctx, share)
		}
		nc, err := d.DialContext(actx, "tcp", ap.String())
		cancel()
		if err == nil {
			tc = nc.(*net.TCPConn)
			break
		}
		lastErr = err
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if tc == nil {
		return nil, withDetail(ErrRefused, "%q over kernel tcp: %v", e.Name, lastErr)
	}
	id := t.lanes.newID()
	c := newLaneConn(t, tc, Addr{Name: t.name, ID: id}, raddr, why)
	c.id, c.dialed = id, true
	dl := time.Now().Add(tcpHandshakeTimeout)
	if cdl, ok := ctx.Deadline(); ok && cdl.Before(dl) {
		dl = cdl
	}
	_ = tc.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = tc.SetDeadline(time.Unix(1, 0)) })
	err := c.dialPreamble(e.Name, psk)
	if !stop() || ctx.Err() != nil {
		err = ctx.Err()
	}
	if err == nil && !t.lanes.add(c) {
		err = ErrTransportClosed
	}
	if err != nil {
		lane.Reset(tc)
		return nil, err
	}
	_ = tc.SetDeadline(time.Time{})
	lane.SetKeepAlive(tc, ka)
	return c, nil
}

// dialPreamble runs the dialer's side of the preamble on c's TCP conn.
func (c *Conn) dialPreamble(name string, psk []byte) error {
	tc := c.lane.tc
	a := newDialAuth(psk, name)
	local := []byte(c.laddr.Name) // printable ASCII, at most 255 bytes, as the listener checks
	local = local[:min(len(local), 255)]
	for i, b := range local {
		if b <= ' ' || b > '~' {
			local[i] = '_'
		}
	}
	b := lane.AppendHello(make([]byte, 0, lane.MaxPreamble), lane.Hello{PSK: psk != nil, ID: c.id, Name: name,
		LocalName: string(local), Challenge: a.challenge()})
	if _, err := tc.Write(b); err != nil {
		return withDetail(ErrRefused, "%q over kernel tcp: %v", name, err)
	}
	var r [lane.ReplyFixed]byte
	if _, err := io.ReadFull(tc, r[:]); err != nil {
		return withDetail(ErrRefused, "%q over kernel tcp: no answer to the preamble: %v", name, err)
	}
	reply, ok := lane.ParseReply(r)
	if !ok {
		return withDetail(ErrRefused, "%q over kernel tcp: the endpoint does not speak ucxnet", name)
	}
	status, lpsk, lid := reply.Status, reply.PSK, reply.ID
	if err := tcpStatusErr(status, name); err != nil {
		return err
	}
	c.remoteID, c.raddr.ID = lid, lid // c is not shared yet
	switch {
	case psk == nil && lpsk:
		return withDetail(ErrRefused, "listener %q requires a pre-shared key", name)
	case psk != nil && !lpsk:
		return withDetail(ErrRefused, "listener %q did not authenticate (it has no pre-shared key)", name)
	case psk == nil:
		return nil
	}
	nl := make([]byte, auth.ChallengeLen)
	if _, err := io.ReadFull(tc, nl); err != nil {
		return withDetail(ErrRefused, "%q over kernel tcp: %v", name, err)
	}
	a.hs.SetListenerChallenge(nl)
	return c.proveTCP(a, lid, name)
}

// proveTCP sends the dialer's proof and checks the listener's.
func (c *Conn) proveTCP(a *authState, lid uint64, name string) error {
	tc := c.lane.tc
	mac, err := a.hs.Proof(auth.Dialer, c.id, lid)
	if err != nil {
		c.t.authFailed()
		return withDetail(ErrRefused, "listener %q: %v", name, err)
	}
	if _, err := tc.Write(mac); err != nil {
		return withDetail(ErrRefused, "%q over kernel tcp: %v", name, err)
	}
	var st [1]byte
	if _, err := io.ReadFull(tc, st[:]); err != nil {
		return withDetail(ErrRefused, "%q over kernel tcp: %v", name, err)
	}
	if err := tcpStatusErr(st[0], name); err != nil {
		c.t.authFailed()
		return err
	}
	theirs := make([]byte, auth.MACLen)
	if _, err := io.ReadFull(tc, theirs); err != nil {
		return withDetail(ErrRefused, "%q over kernel tcp: %v", name, err)
	}
	if !a.hs.Verify(auth.Listener, theirs, c.id, lid) {
		c.t.authFailed()
		return withDetail(ErrRefused, "listener %q failed to prove the pre-shared key", name)
	}
	return nil
}

// tcpStatusErr is the dial error a listener's status byte means.
func tcpStatusErr(status byte, name string) error {
	switch status {
	case lane.StatusOK:
		return nil
	case lane.StatusNoListener:
		return withDetail(ErrRefused, "no listener named %q at its TCP endpoint", name)
	case lane.StatusNeedPSK:
		return withDetail(ErrRefused, "listener %q requires a pre-shared key", name)
	case lane.StatusNoPSK:
		return withDetail(ErrRefused, "listener %q did not authenticate (it has no pre-shared key)", name)
	case lane.StatusBacklogFull:
		return withDetail(ErrRefused, "listener %q: backlog full", name)
	case lane.StatusAuthFailed:
		return withDetail(ErrRefused, "listener %q: pre-shared key mismatch", name)
	}
	return withDetail(ErrRefused, "listener %q: unknown status %d", name, status)
}

// mapErr gives a TCP error the conn's ucxnet addresses; io.EOF stays.
func (c *Conn) mapErr(err error) error {
	var op *net.OpError
	if err == nil || err == io.EOF || !errors.As(err, &op) {
		return err
	}
	inner := op.Err
	for _, errno := range []syscall.Errno{syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH} {
		if errors.Is(inner, errno) {
			// The kernel gave the peer up (keepalive probes unanswered,
			// or answered by an ICMP unreachable once the link is down):
			// a dead peer, ECONNRESET as on the UCX lane, not a timeout
			// that net.Error.Timeout would take for a deadline.
			inner = withDetail(ErrReset, "peer unreachable (kernel tcp: %v)", errno)
			break
		}
	}
	return &net.OpError{Op: op.Op, Net: Network, Source: c.laddr, Addr: c.raddr, Err: inner}
}

// read reads from the TCP conn. The kernel reports a connection's failure
// (reset, keepalive or TCP_USER_TIMEOUT) to one call only: a Read that
// follows a Write that got it sees EOF. An EOF on a connection the kernel
// has closed (TCP_CLOSE) before any orderly EOF is that failure: ECONNRESET,
// as on the UCX lane.
func (tl *tcpLane) read(c *Conn, b []byte) (int, error) {
	n, err := tl.tc.Read(b)
	c.cnt.bytesIn.Add(uint64(n))
	if err == io.EOF && !tl.eof.Load() {
		if tl.failed() {
			return n, c.opErr("read", withDetail(ErrReset, "connection ended abnormally (kernel tcp)"))
		}
		tl.eof.Store(true)
	}
	return n, c.mapErr(err)
}

// write writes to the TCP conn; EPIPE on a connection that failed (the
// error went to a Read) is ECONNRESET, as on the UCX lane.
func (tl *tcpLane) write(c *Conn, b []byte) (int, error) {
	n, err := tl.tc.Write(b)
	c.cnt.bytesOut.Add(uint64(n))
	if err != nil && errors.Is(err, syscall.EPIPE) && tl.failed() {
		return n, c.opErr("write", withDetail(ErrReset, "connection ended abnormally (kernel tcp)"))
	}
	return n, c.mapErr(err)
}

func (tl *tcpLane) close(c *Conn) error {
	c.t.lanes.remove(c)
	return c.mapErr(tl.tc.Close())
}

// ReadFrom copies r to the conn until EOF. On the TCP lane it is
// (*net.TCPConn).ReadFrom, so io.Copy from a file or socket keeps
// sendfile and splice; on the UCX lane, a plain copy.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	if c.lane != nil {
		n, err := c.lane.tc.ReadFrom(r)
		c.cnt.bytesOut.Add(uint64(n))
		return n, c.mapErr(err)
	}
	return io.Copy(writerOnly{c}, r)
}

// WriteTo copies the conn to w until EOF. On the TCP lane it is
// (*net.TCPConn).WriteTo (splice to a socket or pipe); on the UCX lane, a
// plain copy.
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	if c.lane != nil {
		n, err := c.lane.tc.WriteTo(w)
		c.cnt.bytesIn.Add(uint64(n))
		return n, c.mapErr(err)
	}
	return io.Copy(w, readerOnly{c})
}

// writerOnly and readerOnly hide a Conn's ReadFrom and WriteTo from
// io.Copy (which would call them back).
type writerOnly struct{ io.Writer }
type readerOnly struct{ io.Reader }

// laneDeadline sets a deadline on a lane conn (which of them: what).
func (tl *tcpLane) setDeadline(c *Conn, what string, t time.Time) error {
	var err error
	switch what {
	case "read":
		err = tl.tc.SetReadDeadline(t)
	case "write":
		err = tl.tc.SetWriteDeadline(t)
	default:
		err = tl.tc.SetDeadline(t)
	}
	return c.mapErr(err)
}

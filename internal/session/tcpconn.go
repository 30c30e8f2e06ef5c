package session

// The stream of the kernel-TCP lane, LaneConn: every method is its
// TCP connection's (lane.Conn), with the errors of the standard library
// unwrapped from their *net.OpError (the face wraps them again with its
// addresses); and the dialer's side of the preamble (tcplane.go is the
// listener's).

import (
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/ucxnet/ucxnet/internal/auth"
	"github.com/ucxnet/ucxnet/internal/deadline"
	"github.com/ucxnet/ucxnet/internal/lane"
)

// LaneConn is a stream on the kernel-TCP lane: a TCP connection after
// ucxnet's preamble. All methods are safe for concurrent use.
type LaneConn struct {
	t            *Transport
	tc           *lane.Conn
	id, remoteID uint64 // as a UCX stream's (ConnStats.ID, the addresses)
	laddr, raddr Addr
	dialed       bool
	why          string // why the lane was chosen (Lane)
	mu           sync.Mutex
	closedCh     chan struct{} // closed by Close
	cnt          connCounters
	born         time.Time
}

// laneConns are a Transport's conns on the TCP lane and the lane's
// counters.
type laneConns struct {
	mu     sync.Mutex
	conns  map[*LaneConn]struct{}
	closed bool
	lane.Counters
}

// LaneStats are a Transport's kernel-TCP lane counters. Its fields mean
// what ucxnet.LaneStats's do: ucxnet converts one to the other, so the two
// have the same fields in the same order.
type LaneStats struct {
	OpenConns uint64 `json:"open_conns"`
	Garbage   uint64 `json:"garbage"`
	Oversized uint64 `json:"oversized"`
	Timeouts  uint64 `json:"timeouts"`
	OverCap   uint64 `json:"over_cap"`
}

// add records a lane conn once its preamble is done (the kernel's byte
// counts from then on are its payload); false once the transport is
// closed.
func (lc *laneConns) add(c *LaneConn) bool {
	c.tc.Established()
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.closed {
		return false
	}
	if lc.conns == nil {
		lc.conns = map[*LaneConn]struct{}{}
	}
	lc.conns[c] = struct{}{}
	return true
}

func (lc *laneConns) remove(c *LaneConn) {
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
		lane.Reset(c.tc.TC)
	}
}

// newLaneConn returns a conn on the TCP lane over tc.
func newLaneConn(t *Transport, tc *net.TCPConn, laddr, raddr Addr, why string) *LaneConn {
	return &LaneConn{t: t, laddr: laddr, raddr: raddr, tc: &lane.Conn{TC: tc}, why: why, born: time.Now(),
		closedCh: make(chan struct{})}
}

// laneDown is the error of a kernel-TCP dial that failed below the
// listener's answers: no TCP connection, or one reset, closed or silent
// before the listener said OK or refused, or not ucxnet's. The dial may
// take the UCX lane then (Dialer.dialLane); a listener's refusal never
// is one.
type laneDown struct{ error }

func (e laneDown) Unwrap() error { return e.error }

// laneDownf is a laneDown refusal (ECONNREFUSED) saying what failed.
func laneDownf(format string, args ...any) error {
	return laneDown{withDetail(ErrRefused, format, args...)}
}

// dialPreamble runs the dialer's side of the preamble on c's TCP conn.
func (c *LaneConn) dialPreamble(name string, psk []byte) error {
	tc := c.tc.TC
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
		return laneDownf("%q over kernel tcp: %v", name, err)
	}
	var r [lane.ReplyFixed]byte
	if _, err := io.ReadFull(tc, r[:]); err != nil {
		return laneDownf("%q over kernel tcp: no answer to the preamble: %v", name, err)
	}
	reply, ok := lane.ParseReply(r)
	if !ok {
		return laneDownf("%q over kernel tcp: the endpoint does not speak ucxnet", name)
	}
	status, lpsk, lid := reply.Status, reply.PSK, reply.ID
	refusal := "no listener of that name at its TCP endpoint, or it requires a pre-shared key"
	if psk != nil {
		refusal = "no listener of that name at its TCP endpoint, it has no pre-shared key, or this host failed too many key proofs of late"
	}
	if err := tcpStatusErr(status, name, refusal); err != nil {
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
		return laneDownf("%q over kernel tcp: %v", name, err)
	}
	a.hs.SetListenerChallenge(nl)
	return c.proveTCP(a, lid, name)
}

// proveTCP sends the dialer's proof and checks the listener's.
func (c *LaneConn) proveTCP(a *authState, lid uint64, name string) error {
	tc := c.tc.TC
	mac, err := a.hs.Proof(auth.Dialer, c.id, lid)
	if err != nil {
		c.t.log.authFailed()
		return withDetail(ErrRefused, "listener %q: %v", name, err)
	}
	if _, err := tc.Write(mac); err != nil {
		return laneDownf("%q over kernel tcp: %v", name, err)
	}
	var st [1]byte
	if _, err := io.ReadFull(tc, st[:]); err != nil {
		return laneDownf("%q over kernel tcp: %v", name, err)
	}
	if err := tcpStatusErr(st[0], name, "it refused the key proof: pre-shared key mismatch"); err != nil {
		c.t.log.authFailed()
		return err
	}
	theirs := make([]byte, auth.MACLen)
	if _, err := io.ReadFull(tc, theirs); err != nil {
		return laneDownf("%q over kernel tcp: %v", name, err)
	}
	if !a.hs.Verify(auth.Listener, theirs, c.id, lid) {
		c.t.log.authFailed()
		return withDetail(ErrRefused, "listener %q failed to prove the pre-shared key", name)
	}
	return nil
}

// tcpStatusErr is the dial error a listener's status byte means; refusal
// says what lane.StatusRefused means at this point of the preamble.
func tcpStatusErr(status byte, name, refusal string) error {
	switch status {
	case lane.StatusOK:
		return nil
	case lane.StatusRefused:
		return withDetail(ErrRefused, "listener %q refused the dial (%s)", name, refusal)
	case lane.StatusBacklogFull:
		return withDetail(ErrRefused, "listener %q: backlog full", name)
	}
	return withDetail(ErrRefused, "listener %q: unknown status %d", name, status)
}

// laneErr unwraps a TCP error from its *net.OpError; io.EOF and nil stay.
// A connection that ended abnormally, or that the kernel gave up on, is
// ErrReset, as on the UCX lane.
func laneErr(err error) error {
	if err == lane.ErrAbnormal {
		return withDetail(ErrReset, "%v", lane.ErrAbnormal)
	}
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
			return withDetail(ErrReset, "peer unreachable (kernel tcp: %v)", errno)
		}
	}
	return inner
}

// Read reads from the TCP conn.
func (c *LaneConn) Read(b []byte) (int, error) {
	n, err := c.tc.Read(b)
	c.cnt.bytesIn.Add(uint64(n))
	return n, laneErr(err)
}

// Write writes to the TCP conn.
func (c *LaneConn) Write(b []byte) (int, error) {
	n, err := c.tc.Write(b)
	c.cnt.bytesOut.Add(uint64(n))
	return n, laneErr(err)
}

// bytes returns the payload bytes c received and wrote: the kernel's
// counts, which see every path (sendfile and splice included), or else
// c's own, counted by Read, Write, ReadFrom and WriteTo as each returns.
// Once a Read or WriteTo has seen the peer's EOF, every byte received was
// read: c's own count of them is exact (the kernel's may count the FIN).
func (c *LaneConn) bytes() (in, out uint64) {
	in, out, ok := c.tc.Bytes()
	if !ok {
		return c.cnt.bytesIn.Load(), c.cnt.bytesOut.Load()
	}
	if c.tc.EOF() {
		in = c.cnt.bytesIn.Load()
	}
	return in, out
}

// Close closes the TCP conn; Closed reports it from then on, and Stats
// the kernel's last counts.
func (c *LaneConn) Close() error {
	if _, _, ok := c.tc.Bytes(); ok {
		in, out := c.bytes()
		c.cnt.bytesIn.Store(in)
		c.cnt.bytesOut.Store(out)
	}
	c.mu.Lock()
	if !deadline.Closed(c.closedCh) {
		close(c.closedCh)
	}
	c.mu.Unlock()
	c.t.lanes.remove(c)
	return laneErr(c.tc.TC.Close())
}

// abort resets the conn (a listener closed with it queued).
func (c *LaneConn) abort() {
	c.t.lanes.remove(c)
	lane.Reset(c.tc.TC)
}

// accepted is nothing on this lane: the kernel has the receive window.
func (c *LaneConn) accepted() {}

// Closed reports whether Close was called.
func (c *LaneConn) Closed() bool { return deadline.Closed(c.closedCh) }

// CloseWrite shuts down the writing side, as (*net.TCPConn).CloseWrite.
func (c *LaneConn) CloseWrite() error { return laneErr(c.tc.CloseWrite()) }

// SetLinger is (*net.TCPConn).SetLinger.
func (c *LaneConn) SetLinger(sec int) error { return laneErr(c.tc.TC.SetLinger(sec)) }

// SetKeepAlive is (*net.TCPConn).SetKeepAlive, with the defaults of
// SetKeepAliveConfig.
func (c *LaneConn) SetKeepAlive(on bool) error {
	return c.SetKeepAliveConfig(net.KeepAliveConfig{Enable: on})
}

// SetKeepAliveConfig is (*net.TCPConn).SetKeepAliveConfig.
func (c *LaneConn) SetKeepAliveConfig(cfg net.KeepAliveConfig) error {
	return laneErr(c.tc.TC.SetKeepAliveConfig(cfg))
}

// SetDeadline sets the TCP conn's read and write deadlines.
func (c *LaneConn) SetDeadline(t time.Time) error { return laneErr(c.tc.SetDeadline("", t)) }

// SetReadDeadline sets the TCP conn's read deadline.
func (c *LaneConn) SetReadDeadline(t time.Time) error { return laneErr(c.tc.SetDeadline("read", t)) }

// SetWriteDeadline sets the TCP conn's write deadline.
func (c *LaneConn) SetWriteDeadline(t time.Time) error { return laneErr(c.tc.SetDeadline("write", t)) }

// LocalAddr returns the local address, as a UCX stream's.
func (c *LaneConn) LocalAddr() net.Addr { return c.laddr }

// RemoteAddr returns the remote address, as a UCX stream's.
func (c *LaneConn) RemoteAddr() net.Addr { return c.raddr }

// Lane returns LaneTCP and why the lane was chosen.
func (c *LaneConn) Lane() (name, reason string) { return LaneTCP, c.why }

// Transports names the kernel's TCP.
func (c *LaneConn) Transports() []string { return []string{"tcp(kernel)"} }

// LaneSocket returns the TCP socket. Its options (SetNoDelay, buffers,
// SyscallConn) are the conn's.
func (c *LaneConn) LaneSocket() *net.TCPConn { return c.tc.TC }

// ReadState says whether the peer's end was read; whether data waits the
// socket says (LaneSocket's SyscallConn).
func (c *LaneConn) ReadState() (data, ended bool) { return false, c.tc.EOF() }

// ReadFrom copies r to the TCP conn until EOF with
// (*net.TCPConn).ReadFrom, so that io.Copy from a file or socket keeps
// sendfile and splice.
func (c *LaneConn) ReadFrom(r io.Reader) (int64, error) {
	n, err := c.tc.TC.ReadFrom(r)
	c.cnt.bytesOut.Add(uint64(n))
	return n, laneErr(err)
}

// WriteTo copies the TCP conn to w until EOF with
// (*net.TCPConn).WriteTo (splice to a socket or pipe).
func (c *LaneConn) WriteTo(w io.Writer) (int64, error) {
	n, err := c.tc.WriteTo(w)
	c.cnt.bytesIn.Add(uint64(n))
	return n, laneErr(err)
}

// Stats returns a snapshot of the conn's statistics: the kernel's.
func (c *LaneConn) Stats() ConnStats {
	rtt, closed := lane.Info(c.tc.TC)
	s := ConnStats{ID: c.id, Lane: LaneTCP, LaneReason: c.why, Transports: c.Transports(),
		FramesIn: c.cnt.framesIn.Load(), FramesOut: c.cnt.framesOut.Load(), Age: time.Since(c.born),
		Local: c.laddr.String(), Remote: c.raddr.String(), Dialed: c.dialed, RTT: rtt}
	s.BytesIn, s.BytesOut = c.bytes()
	s.State = laneState(c.tc, closed)
	return s
}

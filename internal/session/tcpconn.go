package session

// The conn side of the kernel-TCP lane: a *Conn whose lane is set
// delegates every method to its lane.Conn, with the errors of the standard
// library unwrapped from their *net.OpError (ucxnet's Conn wraps them
// again with its addresses), and the dialer's side of the preamble
// (tcplane.go is the listener's).

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/ucxnet/ucxnet/internal/auth"
	"github.com/ucxnet/ucxnet/internal/deadline"
	"github.com/ucxnet/ucxnet/internal/lane"
	"github.com/ucxnet/ucxnet/registry"
)

// laneConns are a Transport's conns on the TCP lane and the lane's
// counters.
type laneConns struct {
	mu     sync.Mutex
	conns  map[*Conn]struct{}
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

// LaneStats returns the kernel-TCP lane's counters.
func (t *Transport) LaneStats() LaneStats {
	t.lanes.mu.Lock()
	n := len(t.lanes.conns)
	t.lanes.mu.Unlock()
	return LaneStats{OpenConns: uint64(n), Garbage: t.lanes.Garbage.Load(), Oversized: t.lanes.Oversized.Load(),
		Timeouts: t.lanes.Timeouts.Load(), OverCap: t.lanes.OverCap.Load()}
}

// add records a lane conn once its preamble is done (the kernel's byte
// counts from then on are its payload); false once the transport is
// closed.
func (lc *laneConns) add(c *Conn) bool {
	c.lane.Established()
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
		lane.Reset(c.lane.TC)
	}
}

// newLaneConn returns a conn on the TCP lane over tc.
func newLaneConn(t *Transport, tc *net.TCPConn, laddr, raddr Addr, why string) *Conn {
	return &Conn{t: t, laddr: laddr, raddr: raddr, lane: &lane.Conn{TC: tc}, laneWhy: why, born: time.Now(),
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

// dialTCP dials entry e over the TCP lane: the endpoints in order, then
// the preamble.
func (t *Transport) dialTCP(ctx context.Context, e registry.Entry, eps []netip.AddrPort, psk []byte, raddr Addr, why string, ka time.Duration) (*Conn, error) {
	tc, err := lane.DialEndpoints(ctx, eps)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, laneDownf("%q over kernel tcp: %v", e.Name, err)
	}
	id := lane.NewID()
	c := newLaneConn(t, tc, Addr{Name: t.name, ID: id}, raddr, why)
	c.id, c.dialed = id, true
	dl := time.Now().Add(tcpHandshakeTimeout)
	if cdl, ok := ctx.Deadline(); ok && cdl.Before(dl) {
		dl = cdl
	}
	_ = tc.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = tc.SetDeadline(time.Unix(1, 0)) })
	err = c.dialPreamble(e.Name, psk)
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
	tc := c.lane.TC
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
func (c *Conn) proveTCP(a *authState, lid uint64, name string) error {
	tc := c.lane.TC
	mac, err := a.hs.Proof(auth.Dialer, c.id, lid)
	if err != nil {
		c.t.authFailed()
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
		c.t.authFailed()
		return err
	}
	theirs := make([]byte, auth.MACLen)
	if _, err := io.ReadFull(tc, theirs); err != nil {
		return laneDownf("%q over kernel tcp: %v", name, err)
	}
	if !a.hs.Verify(auth.Listener, theirs, c.id, lid) {
		c.t.authFailed()
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

// laneRead reads from c's TCP conn.
func (c *Conn) laneRead(b []byte) (int, error) {
	n, err := c.lane.Read(b)
	c.cnt.bytesIn.Add(uint64(n))
	return n, laneErr(err)
}

// laneWrite writes to c's TCP conn.
func (c *Conn) laneWrite(b []byte) (int, error) {
	n, err := c.lane.Write(b)
	c.cnt.bytesOut.Add(uint64(n))
	return n, laneErr(err)
}

// laneBytes returns the payload bytes c received and wrote: the kernel's
// counts, which see every path (sendfile and splice included), or else
// c's own, counted by Read, Write, ReadFrom and WriteTo as each returns.
// Once a Read or WriteTo has seen the peer's EOF, every byte received was
// read: c's own count of them is exact (the kernel's may count the FIN).
func (c *Conn) laneBytes() (in, out uint64) {
	in, out, ok := c.lane.Bytes()
	if !ok {
		return c.cnt.bytesIn.Load(), c.cnt.bytesOut.Load()
	}
	if c.lane.EOF() {
		in = c.cnt.bytesIn.Load()
	}
	return in, out
}

// laneClose closes c's TCP conn; Closed reports it from then on, and
// Stats the kernel's last counts.
func (c *Conn) laneClose() error {
	if _, _, ok := c.lane.Bytes(); ok {
		in, out := c.laneBytes()
		c.cnt.bytesIn.Store(in)
		c.cnt.bytesOut.Store(out)
	}
	c.mu.Lock()
	if !deadline.Closed(c.closedCh) {
		close(c.closedCh)
	}
	c.mu.Unlock()
	c.t.lanes.remove(c)
	return laneErr(c.lane.TC.Close())
}

// OnLane reports whether the stream runs on the kernel-TCP lane, whose
// deadlines are the lane conn's own (SetLaneDeadline), and whose ReadFrom
// and WriteTo splice.
func (c *Conn) OnLane() bool { return c.lane != nil }

// SetLaneDeadline sets the lane conn's deadline: which is "read", "write"
// or "" (both).
func (c *Conn) SetLaneDeadline(which string, t time.Time) error {
	return laneErr(c.lane.SetDeadline(which, t))
}

// LaneReadFrom copies r to the lane conn until EOF with
// (*net.TCPConn).ReadFrom, so that io.Copy from a file or socket keeps
// sendfile and splice.
func (c *Conn) LaneReadFrom(r io.Reader) (int64, error) {
	n, err := c.lane.TC.ReadFrom(r)
	c.cnt.bytesOut.Add(uint64(n))
	return n, laneErr(err)
}

// LaneWriteTo copies the lane conn to w until EOF with
// (*net.TCPConn).WriteTo (splice to a socket or pipe).
func (c *Conn) LaneWriteTo(w io.Writer) (int64, error) {
	n, err := c.lane.WriteTo(w)
	c.cnt.bytesIn.Add(uint64(n))
	return n, laneErr(err)
}

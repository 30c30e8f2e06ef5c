package session

// How a conn ends: one terminate for every cause, with a policy
// (EndPolicy) for what the cause owes the peer and the
// application.

import (
	"net"

	"github.com/ucxnet/ucxnet/internal/deadline"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// abort resets c: its listener closed with it queued.
func (c *Conn) abort() { c.terminate(net.ErrClosed, EndReset(stream.RstAbort, RSTIfOpen)) }

// terminate ends c with err, which its Reads (after the data kept) and
// Writes return from now on, and which a dial still waiting returns; c
// leaves the conn table and its peer, and the peer is told as pol says.
// A conn ends once: terminating one that already ended only discards, if
// pol says so. Every end but a clean one comes here (a failure, a reset,
// a refusal in the handshake); a clean end, both FINs exchanged, is
// Close's or the final FIN's (recv.go), and a dial given up ends when
// abandonedTTL passes (dial.go); each leaves the table by removeConn.
func (c *Conn) terminate(err error, pol EndPolicy) {
	c.mu.Lock()
	send := c.terminateLocked(err, pol)
	c.mu.Unlock()
	if send {
		c.t.stats.resetsSent.Add(1)
		_ = c.peer().sendCtl(stream.Header{Kind: stream.KindRst, ConnID: c.remoteID, Aux: uint64(pol.Code)})
	}
	c.t.removeConn(c)
}

// terminateLocked is terminate's part under c.mu: it reports whether the
// peer is to get an RST.
func (c *Conn) terminateLocked(err error, pol EndPolicy) (rst bool) {
	held(&c.mu, "terminateLocked needs Conn.mu")
	if pol.Discard {
		c.dropLocked()
	}
	if c.state.Phase == PhaseDone {
		return false
	}
	rst = pol.TellsPeer(c.state, c.remoteID != 0 && c.peer() != nil)
	err = pol.Err(c.state, err)
	c.keepLocked()
	if buf := c.out.Drop(); buf != nil {
		c.t.outBufs.put(buf)
	}
	if c.state.Phase == PhaseAuthPending && c.hs.auth != nil && c.hs.auth.ln != nil {
		c.hs.auth.ln.removePendingAuth(c)
	}
	if c.state.Phase == PhaseDialing || c.state.Phase == PhaseAbandoned {
		c.dErr = err
		close(c.hs.dialDone)
	}
	c.state.Phase = PhaseDone
	if c.rerr == nil {
		c.rerr = err
	}
	if c.werr == nil {
		c.werr = err
	}
	if !deadline.Closed(c.failedCh) {
		close(c.failedCh)
	}
	broadcast(&c.rcond, c.rwait)
	broadcast(&c.wcond, c.wwait)
	return rst
}

package ucxnet

// How a conn ends: one terminate for every cause (a local Close with data
// unread, the peer's RST or failure, a protocol error, a failed send, the
// handshake's refusals, the transport's Close), with a policy for what the
// cause owes the peer and the application.

import (
	"github.com/ucxnet/ucxnet/internal/lane"
	"github.com/ucxnet/ucxnet/internal/session"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// rstChoice says when terminate tells the peer with an RST.
type rstChoice uint8

const (
	rstNever  rstChoice = iota // the peer already knows, or cannot be told
	rstIfOpen                  // RST only if the conn is open (the peer knows it as established)
	rstAlways                  // RST whatever the state: the peer has a conn waiting for our answer
)

// endPolicy is what ending a conn does besides failing it locally.
type endPolicy struct {
	rst  rstChoice      // whether the peer gets RST(code) (never without its conn id)
	code stream.RstCode // the RST's code
	// discard drops the data received and not yet read; otherwise it
	// stays readable, moved to Go memory, before the error.
	discard bool
	// dialErr, if set, is what a dial still waiting for its answer gets
	// instead of the error.
	dialErr error
}

// endQuiet fails the conn locally: the peer is not told, unread data stays
// readable.
var endQuiet = endPolicy{}

// endGap ends a conn whose stream has a gap on this side (a send of its
// data failed): the peer would wait for the missing bytes for ever, so it
// gets an RST (best effort: the endpoint may be what failed); data already
// received stays readable.
var endGap = endPolicy{rst: rstIfOpen, code: stream.RstAbort}

// endReset resets the conn: unread data is dropped and the peer gets
// RST(code) as rst says.
func endReset(code stream.RstCode, rst rstChoice) endPolicy {
	return endPolicy{rst: rst, code: code, discard: true}
}

// terminate ends c with err, which its Reads (after the data kept) and
// Writes return from now on, and which a dial still waiting returns; c
// leaves the conn table and its peer, and the peer is told as pol says.
// A conn ends once: terminating one that already ended only discards, if
// pol says so. A conn on the kernel-TCP lane is reset.
func (c *Conn) terminate(err error, pol endPolicy) {
	if c.lane != nil {
		c.t.lanes.remove(c)
		lane.Reset(c.lane.tc)
		return
	}
	c.mu.Lock()
	send := c.terminateLocked(err, pol)
	c.mu.Unlock()
	if send {
		c.t.stats.resetsSent.Add(1)
		_ = c.t.sendCtl(c.peer, stream.Header{Kind: stream.KindRst, ConnID: c.remoteID, Aux: uint64(pol.code)})
	}
	c.t.removeConn(c)
}

// terminateLocked is terminate's part under c.mu: it reports whether the
// peer is to get an RST.
func (c *Conn) terminateLocked(err error, pol endPolicy) (rst bool) {
	if pol.discard {
		c.dropLocked()
	}
	if c.state.Phase == session.PhaseDone {
		return false
	}
	rst = (pol.rst == rstAlways || pol.rst == rstIfOpen && c.state.Phase == session.PhaseOpen) && c.remoteID != 0 && c.peer != nil
	if pol.dialErr != nil && c.state.Phase == session.PhaseDialing {
		err = pol.dialErr
	}
	c.keepLocked()
	if buf := c.out.Drop(); buf != nil {
		c.t.putOutBuf(buf)
	}
	if c.state.Phase == session.PhaseAuthPending && c.auth != nil && c.auth.ln != nil {
		c.auth.ln.removePendingAuth(c)
	}
	if c.state.Phase == session.PhaseDialing || c.state.Phase == session.PhaseAbandoned {
		c.dErr = err
		close(c.dialDone)
	}
	c.state.Phase = session.PhaseDone
	if c.rerr == nil {
		c.rerr = err
	}
	if c.werr == nil {
		c.werr = err
	}
	if !isClosedChan(c.failedCh) {
		close(c.failedCh)
	}
	broadcast(&c.rcond, c.rwait)
	broadcast(&c.wcond, c.wwait)
	return rst
}

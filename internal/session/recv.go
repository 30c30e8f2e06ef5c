package session

// The receive side of a Conn: frames from the engine goroutine, the
// reassembly of the stream, and what a failure keeps readable.

import (
	"net"
	"time"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// dropLocked releases all received data not yet read. c.mu is held.
func (c *Conn) dropLocked() {
	held(&c.mu, "dropLocked needs Conn.mu")
	if c.in.Unread() {
		c.lost = true
	}
	c.sh.eng.Release(c.in.Drop()...)
}

// keepLocked moves unread data out of UCX memory into Go memory, so that it
// stays readable after the conn leaves the transport (a peer's reset or
// failure does not discard what already arrived). c.mu is held.
func (c *Conn) keepLocked() {
	held(&c.mu, "keepLocked needs Conn.mu")
	c.sh.eng.Release(c.in.Keep()...)
}

// handleFrame takes DATA, FIN, WINDOW, RST and PING (engine goroutine).
func (c *Conn) handleFrame(h stream.Header, ev *engine.Event) {
	switch h.Kind {
	case stream.KindData, stream.KindFin:
		c.handleStream(h, ev)
	case stream.KindWindow:
		c.mu.Lock()
		small := h.Aux < c.swin.Limit()+ingressSmallGrant
		if c.swin.Update(h.Aux) {
			broadcast(&c.wcond, c.wwait)
		}
		c.mu.Unlock()
		if small {
			c.peer().charge(time.Now().UnixNano())
		}
	case stream.KindRst:
		c.t.stats.resetsRecv.Add(1)
		c.terminate(withDetail(ErrReset, "peer sent RST (%v)", stream.RstCode(h.Aux)), EndQuiet)
	case stream.KindPing:
		// A keepalive probe: answer it (the answer's arrival is all the
		// prober needs). Answers are not answered.
		if h.Flags&stream.FlagReply == 0 {
			if id := c.loadRemoteID(); id != 0 {
				_ = c.peer().sendCtl(stream.Header{Kind: stream.KindPing, Flags: stream.FlagReply, ConnID: id, Aux: h.Aux})
			}
		} else if p := c.peer(); p != nil {
			p.notePong(time.Now())
		}
	}
}

// handleStream takes DATA and FIN. A DATA payload is not copied: the conn
// holds UCX's receive descriptor until Read has copied it out.
func (c *Conn) handleStream(h stream.Header, ev *engine.Event) {
	c.mu.Lock()
	if c.state.Phase == PhaseDone || c.state.Phase == PhaseAbandoned {
		c.mu.Unlock()
		return
	}
	if c.state.Closed {
		c.mu.Unlock()
		c.streamAfterClose(h)
		return
	}
	if c.state.Phase == PhaseAuthPending {
		c.mu.Unlock()
		c.t.log.protocolReset(c)
		c.terminate(withDetail(ErrProtocol, "data before authentication"), EndReset(stream.RstProtocol, RSTAlways))
		return
	}
	readable, fin, err := c.in.Push(h, ev)
	if err == stream.ErrDuplicate {
		c.mu.Unlock()
		c.t.stats.duplicates.Add(1)
		c.peer().charge(time.Now().UnixNano())
		return
	}
	if err != nil {
		c.mu.Unlock()
		c.t.log.protocolReset(c)
		c.terminate(withDetail(ErrProtocol, "%v", err), EndReset(stream.RstProtocol, RSTIfOpen))
		return
	}
	if h.Kind == stream.KindData {
		c.cnt.framesIn.Add(1)
		c.cnt.bytesIn.Add(uint64(len(ev.Data)))
	}
	if fin {
		c.state.FinIn = true
	}
	if readable {
		broadcast(&c.rcond, c.rwait)
	}
	c.mu.Unlock()
}

// streamAfterClose takes a DATA or FIN for c, closed locally and waiting
// for the peer's FIN: more data is answered with RST, as TCP does.
func (c *Conn) streamAfterClose(h stream.Header) {
	if h.Kind == stream.KindData {
		c.terminate(net.ErrClosed, EndReset(stream.RstAbort, RSTIfOpen))
		return
	}
	c.mu.Lock()
	done := false
	if c.state.Phase == PhaseOpen && h.Seq == c.in.Next() {
		// The peer's final FIN. If Close has not sent ours yet (both
		// ends closing at once), Close finishes the conn after sending
		// it; removing the conn here would leave the peer waiting for
		// a FIN that never comes.
		c.state.FinIn = true
		if done = c.state.FinWait; done {
			c.state.Phase = PhaseDone
		}
	}
	c.mu.Unlock()
	if done {
		c.t.removeConn(c)
	}
	// A FIN ahead of data still in flight: that data will be answered
	// with RST when it arrives.
}

package ucxnet

// The receive side of a Conn: frames from the engine goroutine, the
// reassembly of the stream, and what a failure keeps readable.

import (
	"fmt"
	"net"
	"time"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// dropLocked releases all received data not yet read. c.mu is held.
func (c *Conn) dropLocked() {
	var refs []stream.Ref
	for _, s := range c.rbuf {
		if s.Ref.Kind != 0 {
			refs = append(refs, s.Ref)
		}
	}
	for _, s := range c.reasm.Drain() {
		if s.Ref.Kind != 0 {
			refs = append(refs, s.Ref)
		}
	}
	c.rbuf = nil
	c.sh.eng.Release(refs...)
}

// keepLocked moves unread data out of UCX memory into Go memory, so that it
// stays readable after the conn leaves the transport (a peer's reset or
// failure does not discard what already arrived). c.mu is held.
func (c *Conn) keepLocked() {
	var refs []stream.Ref
	for i := range c.rbuf {
		s := &c.rbuf[i]
		if s.Ref.Kind != 0 {
			refs = append(refs, s.Ref)
			s.Data = append([]byte(nil), s.Data...)
			s.Ref = stream.Ref{}
		}
	}
	for _, s := range c.reasm.Drain() { // can never be delivered now
		if s.Ref.Kind != 0 {
			refs = append(refs, s.Ref)
		}
	}
	c.sh.eng.Release(refs...)
}

// handleFrame takes DATA, FIN, WINDOW, RST and PING (engine goroutine).
func (c *Conn) handleFrame(h stream.Header, ev *engine.Event) {
	switch h.Kind {
	case stream.KindData, stream.KindFin:
		c.handleStream(h, ev)
	case stream.KindWindow:
		c.mu.Lock()
		if c.swin.Update(h.Aux) {
			broadcast(&c.wcond, c.wwait)
		}
		c.mu.Unlock()
	case stream.KindRst:
		c.t.stats.resetsRecv.Add(1)
		c.terminate(withDetail(ErrReset, "peer sent RST (%v)", stream.RstCode(h.Aux)), endQuiet)
	case stream.KindPing:
		// A keepalive probe: answer it (the answer's arrival is all the
		// prober needs). Answers are not answered.
		if h.Flags&stream.FlagReply == 0 {
			if id := c.loadRemoteID(); id != 0 {
				_ = c.t.sendCtl(c.peer, stream.Header{Kind: stream.KindPing, Flags: stream.FlagReply, ConnID: id, Aux: h.Aux})
			}
		} else if c.peer != nil {
			c.peer.notePong(time.Now())
		}
	}
}

// handleStream takes DATA and FIN. A DATA payload is not copied: the conn
// holds UCX's receive descriptor until Read has copied it out.
func (c *Conn) handleStream(h stream.Header, ev *engine.Event) {
	c.mu.Lock()
	if c.state == stateDone || c.state == stateAbandoned {
		c.mu.Unlock()
		return
	}
	if c.closed {
		c.mu.Unlock()
		c.streamAfterClose(h)
		return
	}
	if c.state == stateAuthPending {
		c.mu.Unlock()
		c.t.protocolReset(c)
		c.terminate(withDetail(ErrProtocol, "data before authentication"), endReset(stream.RstProtocol, rstAlways))
		return
	}
	seg := stream.Segment{Kind: h.Kind, Seq: h.Seq, Data: ev.Data, Ref: ev.Ref}
	small := len(ev.Data) < c.t.holdMin
	if small && len(ev.Data) > 0 {
		// Holding a UCX descriptor (a whole FIFO segment or receive buffer)
		// for a few bytes would let a window of tiny frames pin far more
		// memory than the window: copy small payloads instead — in order,
		// straight into the read buffer (appendLocked); out of order, into
		// a copy the reassembler keeps.
		seg.Ref = stream.Ref{}
		if h.Seq != c.reasm.Next() {
			seg.Data = append([]byte(nil), ev.Data...)
		}
	}
	segs, err := c.reasm.Push(seg)
	if err == stream.ErrDuplicate {
		c.mu.Unlock()
		c.t.stats.duplicates.Add(1)
		return // not held: released with the batch
	}
	if err == nil && len(ev.Data) > 0 {
		if !small {
			ev.Hold() // the segment is in rbuf or pending now
		}
		err = c.rwin.Receive(len(ev.Data))
	}
	if err == nil && h.Kind == stream.KindData {
		c.cnt.framesIn.Add(1)
		c.cnt.bytesIn.Add(uint64(len(ev.Data)))
	}
	if err == nil && c.reasm.Cost() > int(c.rwin.Size()) {
		// Out-of-order frames are charged their memory, not only their
		// bytes: a peer sending tiny frames out of order cannot make a conn
		// hold many times its window.
		err = fmt.Errorf("out-of-order frames hold %d bytes (with per-frame overhead), more than the %d-byte window", c.reasm.Cost(), c.rwin.Size())
	}
	if err != nil {
		c.mu.Unlock()
		c.t.protocolReset(c)
		c.terminate(withDetail(ErrProtocol, "%v", err), endReset(stream.RstProtocol, rstIfOpen))
		return
	}
	for _, s := range segs {
		if s.Kind == stream.KindFin {
			c.rEOF = true
		} else {
			c.appendLocked(s)
		}
	}
	if len(segs) > 0 {
		broadcast(&c.rcond, c.rwait)
	}
	c.mu.Unlock()
}

// streamAfterClose takes a DATA or FIN for c, closed locally and waiting
// for the peer's FIN: more data is answered with RST, as TCP does.
func (c *Conn) streamAfterClose(h stream.Header) {
	if h.Kind == stream.KindData {
		c.terminate(net.ErrClosed, endReset(stream.RstAbort, rstIfOpen))
		return
	}
	c.mu.Lock()
	done := false
	if c.state == stateOpen && h.Seq == c.reasm.Next() {
		// The peer's final FIN. If Close has not sent ours yet (both
		// ends closing at once), Close finishes the conn after sending
		// it; removing the conn here would leave the peer waiting for
		// a FIN that never comes.
		c.rEOF = true
		if done = c.finWait; done {
			c.state = stateDone
		}
	}
	c.mu.Unlock()
	if done {
		c.t.removeConn(c)
	}
	// A FIN ahead of data still in flight: that data will be answered
	// with RST when it arrives.
}

// appendLocked queues an in-order segment for Read. Small Go-owned
// payloads are coalesced into the tail buffer, so that many tiny frames
// cost about their bytes, not a segment each. c.mu is held.
func (c *Conn) appendLocked(s stream.Segment) {
	if s.Ref.Kind == 0 && len(c.rbuf) > 0 {
		tail := &c.rbuf[len(c.rbuf)-1]
		if tail.Ref.Kind == 0 && cap(tail.Data)-len(tail.Data) >= len(s.Data) {
			tail.Data = append(tail.Data, s.Data...)
			return
		}
	}
	if s.Ref.Kind == 0 && len(s.Data) < c.t.holdMin {
		buf := c.t.getBuf()[:len(s.Data)]
		copy(buf, s.Data)
		s.Data = buf
	}
	c.rbuf = append(c.rbuf, s)
}

// maxAhead bounds how far past the next expected frame a frame may arrive
// (UCX does not promise AM order); beyond it the conn is reset.
const maxAhead = 1 << 16

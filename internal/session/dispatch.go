package session

// Frame dispatch: what the engine reports, handed to the conns it is for
// (the handshake frames to handshake.go).

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// sendCtl sends a header-only frame to p.
func (p *peer) sendCtl(h stream.Header) error {
	hb := h.Bytes()
	_, _, err := p.send(engine.Frames{Header: hb[:]})
	return err
}

// engineHandler receives an engine's event batches for its shard of a
// Transport (an unexported type, so that the handler is no part of the
// public API).
type engineHandler struct{ s *shard }

// HandleEvents implements engine.Handler. It runs on the engine
// goroutine, which it marks as the shard's owner for the ownership checks
// (owner.go) while they are on.
func (h engineHandler) HandleEvents(evs []engine.Event) {
	if checkOwners {
		h.s.owner.enter()
		defer h.s.owner.exit()
	}
	h.s.handleEvents(evs)
}

// handleEvents handles a batch of events of shard s's engine.
func (s *shard) handleEvents(evs []engine.Event) {
	t := s.t
	now := time.Now().UnixNano() // one clock read per batch, for liveness
	frames := false
	for i := range evs {
		ev := &evs[i]
		switch ev.Kind {
		case engine.Frame:
			frames = true
			s.handleFrame(ev, now)
		case engine.EPError:
			s.handleEPError(ev.EP, ev.Err)
		case engine.Done:
			t.ops.done(ev.Token, ev.Err)
		case engine.Tick:
			s.tickAll(time.Unix(0, now))
		case engine.Writable:
			s.resetFailed()
			s.reapGone(frames)
		default:
			s.handleBad(ev)
		}
	}
	// Frames queued while the batch came in, or kept for a backed-up
	// peer (coalesce.go).
	if s.out.queued.Load() {
		if w := s.eng.Acquire(false); w != nil {
			s.giveBack(w)
		}
	}
}

// tickAll is s's engine's Tick: s's keepalive sweep, the watch over the
// process's shared-memory FIFOs (smWatch) and the close-on-exec sweep
// (fdSweep) ride on the engine's wake-ups, and frames kept for a
// backed-up peer go out.
func (s *shard) tickAll(now time.Time) {
	s.t.smw.Tick(now)
	fdSweep.Tick(now)
	s.sweep.tick(now)
	if s.out.queued.Load() {
		s.flushOut()
	}
}

// connFor returns the conn a frame that arrived on shard s names, if the
// frame came from the endpoint that conn is bound to; frames for unknown
// conns and frames from elsewhere (another shard included) are counted
// and get nil. Before its ACCEPT a dialed conn is bound to nothing: only
// that answer, from whoever, may bind it (handleHandshake); other frames
// for it are kept until then (stashEarly) and get nil too. An accepted
// conn is bound by the first frame for it (learnFrom). A frame that
// arrives counts as a sign of life of the conn's peer.
func (s *shard) connFor(h stream.Header, ev *engine.Event, now int64) *Conn {
	t := s.t
	c := s.lookup(h.ConnID)
	if c == nil {
		if t.lookup(h.ConnID) != nil {
			t.log.foreignFrame() // a conn of another shard
		} else {
			t.stats.unknownConn.Add(1)
		}
		s.strayFrame(h, ev, now)
		return nil
	}
	if c.from != ev.From {
		switch {
		case c.from == 0 && (h.Kind == stream.KindAccept || h.Kind == stream.KindRefuse):
		case c.from == 0 && c.learnFrom && h.Kind != stream.KindAccept && h.Kind != stream.KindRefuse && !strayPong(h):
			s.learnFrom(c, ev.From)
		case c.from == 0 && c.hs.stashEarly(h, ev):
			return nil
		default:
			t.log.foreignFrame()
			s.strayFrame(h, ev, now)
			return nil
		}
	}
	// A sign of life of the conn's peer only if it came from that peer's
	// own endpoint: a conn bound to another endpoint (a CONNECT that
	// claimed the peer's address, a dial's ACCEPT that came from
	// elsewhere) must not keep a silent peer alive.
	if p := c.peer(); p != nil && p.lastRecv.Load() != now && p.isFrom(ev.From) {
		p.lastRecv.Store(now) // once per batch, not per frame
	}
	return c
}

// handleBad counts a frame UCX delivered but the C side could not take (a
// rendezvous offer, an oversized header, or no memory for a copy). If it
// was part of a conn's stream, that stream now has a gap that will never
// fill: reset the conn rather than let it stall.
func (s *shard) handleBad(ev *engine.Event) {
	t := s.t
	t.log.badFrame()
	h, err := stream.DecodeHeader(ev.Header())
	if err != nil || (h.Kind != stream.KindData && h.Kind != stream.KindFin) {
		return
	}
	if c := s.lookup(h.ConnID); c != nil && s.ownFrame(c, ev.From) {
		t.log.protocolReset(c)
		c.terminate(withDetail(ErrReset, "frame %d could not be received", h.Seq), EndReset(stream.RstProtocol, RSTIfOpen))
	}
}

// ownFrame reports whether a frame for c, a conn of s (s.lookup), that
// arrived from the endpoint from is c's own: from the endpoint c is bound
// to, or the first for an accepted conn not bound yet, which binds it
// (learnFrom). Engine goroutine.
func (s *shard) ownFrame(c *Conn, from uintptr) bool {
	if c.from == 0 && c.learnFrom {
		s.learnFrom(c, from)
	}
	return c.from == from
}

// handleFrame handles a frame that arrived on shard s.
func (s *shard) handleFrame(ev *engine.Event, now int64) {
	t := s.t
	t.stats.framesIn.Add(1)
	h, err := stream.DecodeHeader(ev.Header())
	if err != nil {
		t.log.badFrame()
		s.chargeFrom(ev.From, now)
		return
	}
	if ev.DataLen != len(ev.Data) {
		err = fmt.Errorf("payload of %d bytes arrived as %d", ev.DataLen, len(ev.Data))
	}
	if err == nil {
		err = h.Validate(len(ev.Data), t.cfg.EagerMax)
	}
	if err != nil {
		t.log.badFrame()
		s.chargeFrom(ev.From, now)
		if h.ConnID != 0 && h.Kind != stream.KindConnect {
			if c := s.lookup(h.ConnID); c != nil && s.ownFrame(c, ev.From) {
				t.log.protocolReset(c)
				c.terminate(withDetail(ErrProtocol, "%v", err), EndReset(stream.RstProtocol, RSTIfOpen))
			}
		}
		return
	}
	t.stats.bytesIn.Add(uint64(len(ev.Data)))
	if h.Kind == stream.KindConnect {
		if ev.From != 0 && t.flooded.hasFrom(ev.From, time.Unix(0, now)) {
			t.stats.connectsDropped.Add(1) // from a sender found flooding CONNECTs
			return
		}
		s.handleConnect(ev.Data, ev.From)
		return
	}
	if h.Kind == stream.KindAccept && s.unmatchedAccept(h, ev, now) {
		return
	}
	c := s.connFor(h, ev, now)
	if c == nil {
		return
	}
	if h.Kind == stream.KindPing {
		p := c.peer()
		p.charge(now)
		if h.Flags&stream.FlagReply == 0 && p != nil && !p.allowPong(now) {
			return // over the peer's PING budget: not answered
		}
	}
	switch h.Kind {
	case stream.KindAccept, stream.KindRefuse:
		// Before the dial can return: the connection UCX's async thread
		// accepted from the listener.
		t.markUCXFDs()
		c.hs.handleHandshake(h, ev.Data, ev.From)
		if p := c.peer(); h.Kind == stream.KindAccept && p != nil && c.from == ev.From && s.lookup(h.ConnID) == c {
			t.mu.Lock()
			p.noteFromLocked(c)
			t.mu.Unlock()
		}
		c.hs.replayEarly()
	case stream.KindAuth:
		c.hs.handleAuth(h, ev.Data)
	default:
		c.handleFrame(h, ev)
	}
}

// unmatchedAccept sees to an ACCEPT that arrived on shard s and matches
// no dial of ours waiting there (nor repeats the one that answered it):
// it answers with an RST naming the conn id in the ACCEPT's Hello, as TCP
// answers an unexpected SYN-ACK, if the ACCEPT came from the endpoint of
// one of s's peers. A CONNECT that named one of our workers' addresses
// but was not ours (forged) thus costs its listener no conn for longer
// than a round trip. It reports whether it took the frame; a Hello that
// does not decode is left to the handshake, which counts it. Engine
// goroutine.
func (s *shard) unmatchedAccept(h stream.Header, ev *engine.Event, now int64) bool {
	t := s.t
	var hello stream.Hello
	if hello.UnmarshalBinary(ev.Data) != nil || hello.ConnID == 0 {
		return false
	}
	if c := s.lookup(h.ConnID); c != nil {
		c.mu.Lock()
		waiting := c.dialed && c.from == 0 && (c.state.Phase == PhaseDialing || c.state.Phase == PhaseAbandoned)
		answered := c.dialed && c.remoteID == hello.ConnID
		c.mu.Unlock()
		if waiting || answered {
			return false
		}
	}
	t.stats.unknownConn.Add(1)
	t.mu.RLock()
	p := s.peersByFrom[ev.From]
	t.mu.RUnlock()
	if p != nil {
		t.stats.resetsSent.Add(1)
		_ = p.sendCtl(stream.Header{Kind: stream.KindRst, ConnID: hello.ConnID, Aux: uint64(stream.RstUnknownConn)})
	}
	s.strayFrame(h, ev, now)
	return true
}

// errEngineClosed ends the operations still waiting when the engine is
// gone.
var errEngineClosed = errors.New("ucxnet: engine closed with the operation unfinished")

// endpointWhy is the reason an endpoint failure gives its conns.
func endpointWhy(err error) string {
	if err == nil {
		return "endpoint failed"
	}
	s := err.Error()
	if rest, ok := strings.CutPrefix(s, "ucx: endpoint: "); ok {
		return rest
	}
	return s
}

// strayFrame sees to a frame for a conn that this side does not know, or
// that is bound to another endpoint. It is still a sign of life of the
// peer whose endpoint it came from, and a PING among such frames is
// answered, addressed to the prober's conn that it names in Aux: a probe
// or an answer that crosses the close of the conn it rides on must not
// make a live peer look dead (keepalive probes are per peer, and any of
// its conns may carry one).
func (s *shard) strayFrame(h stream.Header, ev *engine.Event, now int64) {
	t := s.t
	t.mu.RLock()
	p := s.peersByFrom[ev.From]
	t.mu.RUnlock()
	if p == nil {
		return
	}
	if h.Kind != stream.KindData && h.Kind != stream.KindFin {
		// Data still in flight to a conn that just closed is no flood:
		// with small frames and a large window it can be many frames.
		p.charge(now)
	}
	p.lastRecv.Store(now)
	if h.Kind == stream.KindPing && h.Flags&stream.FlagReply != 0 {
		p.notePong(time.Unix(0, now))
	}
	if h.Kind == stream.KindPing && h.Flags&stream.FlagReply == 0 && h.Aux != 0 && p.allowPong(now) {
		_ = p.sendCtl(stream.Header{Kind: stream.KindPing, Flags: stream.FlagReply, ConnID: h.Aux}) // no Aux: strayPong
	}
}

// isFrom reports whether from is the endpoint p's own frames come
// from (learnt from its conns' handshakes). Before that is known (a dial
// waiting for its ACCEPT, an accepted conn waiting for its dialer's
// proof) nothing counts as p's.
func (p *peer) isFrom(from uintptr) bool { return from != 0 && p.from.Load() == from }

// handleEPError fails every conn on a failed endpoint of shard s and
// closes it.
func (s *shard) handleEPError(ep engine.EP, why error) {
	t := s.t
	t.stats.peerFailures.Add(1)
	t.mu.Lock()
	p := s.peersByEP[ep]
	t.mu.Unlock()
	if p == nil {
		// Already closed by us: UCX reports the failure of an endpoint
		// being closed; nothing is left to do.
		return
	}
	p.fail(endpointWhy(why))
}

// fail fails every conn to p and force-closes p's endpoint, which
// cancels what UCX still has queued on it.
func (p *peer) fail(why string) {
	p.failClose(why, true)
}

// failClose fails every conn to p and closes p's endpoint, forced or
// not.
func (p *peer) failClose(why string, force bool) {
	t := p.sh.t
	t.smw.NotePeerFailure(time.Now())
	t.mu.Lock()
	conns := make([]*Conn, 0, len(p.conns))
	for _, c := range p.conns {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	if len(conns) > 0 {
		t.log.event(slog.LevelWarn, "ucxnet: peer failed", "peer", conns[0].raddr.Name, "conns", len(conns), "reason", why)
	}
	for _, c := range conns {
		c.terminate(withDetail(ErrReset, "peer failed: %s", why), EndPolicy{DialErr: withDetail(ErrRefused, "peer unreachable: %s", why)})
	}
	p.close(force)
}

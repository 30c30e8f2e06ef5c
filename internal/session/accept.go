package session

// The listener side of the handshake: a CONNECT that arrives on a shard
// is admitted, checked and answered with ACCEPT (a conn queued for the
// listener, or waiting for its dialer's proof) or REFUSE.

import (
	"time"

	"github.com/ucxnet/ucxnet/internal/auth"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// handleConnect answers a CONNECT that arrived on shard at: ACCEPT into
// the named listener's queue, or REFUSE. Nothing in the Hello reaches UCX
// before it is checked: the listener must exist first, and the worker
// address is validated before an endpoint is created from it (see
// progress.Engine.Connect).
func (s *shard) handleConnect(payload []byte, from uintptr) {
	t := s.t
	var hello stream.Hello
	if err := hello.UnmarshalBinary(payload); err != nil || len(hello.WorkerAddr) == 0 {
		t.log.badFrame()
		return
	}
	if t.flooded.has(hello.WorkerAddr, time.Now()) {
		t.stats.connectsDropped.Add(1) // failed for flooding us a moment ago
		return
	}
	if checkPeerLimits(hello) != nil {
		t.log.badFrame()
		s.refuseAddr(from, hello.WorkerAddr, hello.ConnID, stream.RefuseBadHello)
		return
	}
	t.mu.RLock()
	l := t.listeners[hello.Name]
	t.mu.RUnlock()
	if l == nil {
		s.refuseAddr(from, hello.WorkerAddr, hello.ConnID, stream.RefuseNoListener)
		return
	}
	if c, again := t.repeatedConnect(hello, payload); again {
		if c != nil {
			c.hs.answerAgain(hello.Name)
		}
		return
	}
	if l.psk != nil && !s.keyedAdmit(hello, from) {
		return
	}
	c := l.acceptedConn(hello, t.acceptShard(s, &hello))
	if c.hs.auth != nil {
		c.hs.auth.connectFrom = from
	}
	if err := t.attach(hello.WorkerAddr, c, false, s, from); err != nil {
		t.stats.refused.Add(1)
		if err == errTooManyPeers {
			s.admissionDropped(from)
		} else {
			t.log.badFrame() // an address UCX could not take
			logUnusableAddress(t.lib.Version, hello.UCX, err)
		}
		return
	}
	if t.isClosed() || l.isClosed() {
		t.removeConn(c)
		c.peer().refuse(hello.ConnID, stream.RefuseNoListener)
		return
	}
	if c.hs.auth != nil && !l.awaitProof(c, hello, payload) {
		return
	}
	if c.hs.auth == nil {
		c.hs.noteConnect(hello, payload)
		if !l.enqueue(c) {
			c.hs.refuseAccept(hello.ConnID, stream.RefuseBacklog)
			return
		}
		// Counted before the ACCEPT goes: Accept may return c, and the
		// dialer use it, before this goroutine runs again.
		t.stats.accepts.Add(1)
	}
	c.hs.sendAccept(hello.Name)
}

// awaitProof sets c, an accepted conn of the keyed listener l, to wait for
// its dialer's proof, within the bounds on such conns; false if c was
// dropped instead (its dialer at its bound: no answer, and the dialer
// sends the CONNECT again).
func (l *Listener) awaitProof(c *Conn, hello stream.Hello, payload []byte) bool {
	t := l.t
	evicted := l.addPendingAuth(c)
	if evicted == c {
		t.stats.connectsDropped.Add(1)
		c.terminate(withDetail(ErrRefused, "too many handshakes of its dialer waiting"), EndQuiet)
		return false
	}
	c.hs.noteConnect(hello, payload)
	if evicted != nil {
		t.log.authFailed()
		evicted.terminate(withDetail(ErrRefused, "dropped unproven handshake: too many waiting"), EndReset(stream.RstAbort, RSTAlways))
	}
	// The conn waits for the dialer's proof; it reaches Accept only then.
	time.AfterFunc(authTimeout, func() {
		c.mu.Lock()
		pending := c.state.Phase == PhaseAuthPending
		c.mu.Unlock()
		if pending {
			t.log.authFailed()
			c.terminate(withDetail(ErrRefused, "no authentication within %v", authTimeout), EndReset(stream.RstAbort, RSTAlways))
		}
	})
	return true
}

// keyedAdmit decides, for a CONNECT to a keyed listener, whether to spend
// a conn and a key exchange on it: it must carry a challenge (else it is
// refused), and fit the budget for unproven handshakes (else it gets no
// answer; a sender that keeps on past the budget is failed as a flooder).
func (s *shard) keyedAdmit(hello stream.Hello, from uintptr) bool {
	t := s.t
	if len(hello.Nonce) != auth.ChallengeLen {
		t.log.authFailed()
		s.refuseAddr(from, hello.WorkerAddr, hello.ConnID, stream.RefuseAuth) // a dialer without a key
		return false
	}
	now := time.Now()
	ok, flood := t.hsBudget.allow(from, now)
	if !ok {
		t.stats.connectsDropped.Add(1)
		if flood {
			s.floodedFrom(from, now.UnixNano())
		}
	}
	return ok
}

// admissionDropped notes a CONNECT from the endpoint from that the
// admission of endpoints dropped (admit.go). An endpoint that keeps
// naming addresses it drops (forged ones) has its CONNECTs dropped
// undecoded for a while; no peer is failed: the one it made is not its
// own endpoint, and another would be made from its next address.
func (s *shard) admissionDropped(from uintptr) {
	t := s.t
	if now := time.Now(); from != 0 && t.hsBudget.dropped(from, now) {
		t.stats.peersFlooded.Add(1)
		t.flooded.addFrom(from, now)
	}
}

// acceptedConn makes the listener side of the conn that hello, a CONNECT's,
// asks l for, on shard s: open, or waiting for the dialer's proof when l
// has a key. It is bound to no endpoint yet: the first frame for it does
// that (learnFrom).
func (l *Listener) acceptedConn(hello stream.Hello, s *shard) *Conn {
	t := l.t
	c := newConn(t, nil, Addr{Name: hello.Name}, Addr{Name: displayName(hello.LocalName), ID: hello.ConnID}, preAcceptWindow)
	c.remoteID = hello.ConnID
	c.sh = s
	c.hs.workers = t.multi() && hello.Features&stream.FeatureWorkers != 0
	c.learnFrom = true
	c.keepAlive = keepAliveOf(l.ka)
	c.frame = min(t.cfg.EagerMax, int(hello.EagerMax))
	c.peerSegs = PeerSegLimits(hello)
	c.swin.Update(uint64(hello.Window))
	c.state.Phase = PhaseOpen
	if l.psk != nil {
		c.state.Phase = PhaseAuthPending
		c.hs.auth = newListenAuth(l.psk, hello.Name, hello.Nonce, l)
	}
	return c
}

// refuseAddr answers a CONNECT from the worker at addr, which arrived on
// at from the endpoint from, with REFUSE(code), on an existing endpoint
// or on a new one that the idle-peer sweep closes soon. With too many
// such endpoints already, the dialer gets no answer (its dial fails when
// no answer comes: see Config.KeepAlive).
func (s *shard) refuseAddr(from uintptr, addr []byte, dialerID uint64, code stream.RefuseCode) {
	t := s.t
	p, err := s.refusePeer(addr, from)
	if err != nil {
		t.stats.refused.Add(1)
		if err != errTooManyPeers {
			t.log.badFrame()
		}
		return
	}
	p.refuse(dialerID, code)
}

// refuse answers a dialer's conn dialerID with REFUSE(code), and counts it.
func (p *peer) refuse(dialerID uint64, code stream.RefuseCode) {
	t := p.sh.t
	t.stats.refused.Add(1)
	t.log.hostile("ucxnet: refused a CONNECT", "reason", code.String())
	_ = p.sendCtl(stream.Header{Kind: stream.KindRefuse, ConnID: dialerID, Aux: uint64(code)})
}

package session

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/ucxnet/ucxnet/internal/auth"
	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// The handshake, in one place: CONNECT, ACCEPT/REFUSE and the
// pre-shared-key proof (auth.go holds the key material).
//
// Without a key:
//
//	dialer   → CONNECT  Hello{dialer id, limits, worker address}
//	listener → ACCEPT   Hello{listener id, limits}         (or REFUSE)
//
// Between transports that both run several workers (shard.go), the
// CONNECT carries stream.FeatureWorkers, and the ACCEPT too, with the
// address of the listener's worker that sent it: the conn continues
// between the dialer's worker and that one.
//
// With a key (see auth.go for why the order is what it is):
//
//	dialer   → CONNECT  Hello{..., Nonce: Nd}   (nonce ‖ CPace share)
//	listener → ACCEPT   Hello{..., Nonce: Nl}   (nonce ‖ CPace share; no proof yet)
//	dialer   → AUTH     Hello{MAC: HMAC(kd, Nd, Nl, ids, name)}, kd from the session key
//	listener → AUTH     FlagReply, Hello{MAC: HMAC(kl, ...)} once the
//	                    dialer's proof checked out; then the conn reaches
//	                    Accept. A wrong proof gets REFUSE(auth).
//
// A dialed conn is bound to the UCX endpoint its ACCEPT came from
// (engine.Event.From), an accepted conn to that of the first frame for it
// (the dialer sends a WINDOW, or its AUTH, at once): only the worker that
// got the ACCEPT knows its id. Frames for a bound conn from any other
// endpoint are dropped and counted (Stats.ForeignFrames), so a third
// process that learns a conn id cannot inject data or resets into it.

// preAcceptWindow is the receive window an accepted conn advertises until
// Accept takes it; Accept then grows it to Config.Window. A backlog of
// unaccepted conns thus holds at most Backlog × preAcceptWindow of a
// peer's data, not Backlog × Window.
const preAcceptWindow = 256 << 10

// Handshake bounds.
const (
	// maxPendingAuth bounds the conns of one listener waiting for their
	// dialer's pre-shared-key proof; when it is full the oldest is dropped
	// to make room (an honest dialer proves within a round trip).
	maxPendingAuth = 64
	// maxPendingAuthPerPeer bounds those conns per dialing worker.
	maxPendingAuthPerPeer = 8
	// maxIdlePeers bounds the endpoints without conns; a CONNECT that
	// would need another one (to be refused) gets no answer.
	maxIdlePeers = 64
	// minPeerFrame is the smallest frame limit a peer may ask for (its
	// EagerMax, ShmFrame, TCPFrame): smaller ones would make every write
	// to it a storm of tiny frames, each a call into UCX under the engine
	// lock that all conns share.
	minPeerFrame = 1024
)

// checkPeerLimits rejects a Hello whose frame limits are below
// minPeerFrame.
func checkPeerLimits(h stream.Hello) error {
	for _, v := range []uint32{h.EagerMax, h.ShmFrame, h.TCPFrame} {
		if v != 0 && v < minPeerFrame {
			return fmt.Errorf("peer asks for frames of at most %d bytes (below %d)", v, minPeerFrame)
		}
	}
	return nil
}

// sendConnect sends c's CONNECT to its peer (dial side).
func (t *Transport) sendConnect(c *Conn, name string) error {
	hello := stream.Hello{
		ConnID: c.id, EagerMax: uint32(t.cfg.EagerMax), Window: uint32(t.cfg.Window),
		Name: name, LocalName: t.name, WorkerAddr: c.sh.eng.Address(), Nonce: c.auth.challenge(),
		ShmFrame: uint32(t.shmFrame), TCPFrame: uint32(t.tcpFrame), UCX: UCX().Version, Proc: selfProc(),
	}
	if c.workers {
		hello.Features = stream.FeatureWorkers
	}
	c.mu.Lock()
	p := c.peer() // a resend may go through another endpoint (refreshDial)
	c.mu.Unlock()
	return t.sendHello(p, stream.Header{Kind: stream.KindConnect}, hello)
}

// sendHello sends a handshake frame whose payload is hello.
func (t *Transport) sendHello(p *peer, h stream.Header, hello stream.Hello) error {
	b, err := hello.MarshalBinary()
	if err != nil {
		return err
	}
	h.Length = uint32(len(b))
	hb := h.Bytes()
	_, _, err = t.send(p, engine.Frames{Header: hb[:], Data: b})
	return err
}

// handleConnect answers a CONNECT that arrived on shard at: ACCEPT into
// the named listener's queue, or REFUSE. Nothing in the Hello reaches UCX
// before it is checked: the listener must exist first, and the worker
// address is validated before an endpoint is created from it (see
// progress.Engine.Connect).
func (t *Transport) handleConnect(at *shard, payload []byte, from uintptr) {
	var hello stream.Hello
	if err := hello.UnmarshalBinary(payload); err != nil || len(hello.WorkerAddr) == 0 {
		t.badFrame()
		return
	}
	if t.flooded.has(hello.WorkerAddr, time.Now()) {
		t.stats.connectsDropped.Add(1) // failed for flooding us a moment ago
		return
	}
	if checkPeerLimits(hello) != nil {
		t.badFrame()
		t.refuseAddr(at, from, hello.WorkerAddr, hello.ConnID, stream.RefuseBadHello)
		return
	}
	t.mu.RLock()
	l := t.listeners[hello.Name]
	t.mu.RUnlock()
	if l == nil {
		t.refuseAddr(at, from, hello.WorkerAddr, hello.ConnID, stream.RefuseNoListener)
		return
	}
	if c, again := t.repeatedConnect(hello, payload); again {
		if c != nil {
			t.answerAgain(c, hello.Name)
		}
		return
	}
	if l.psk != nil && !t.keyedAdmit(at, hello, from) {
		return
	}
	c := t.acceptedConn(l, hello, t.acceptShard(at, &hello))
	if c.auth != nil {
		c.auth.connectFrom = from
	}
	if err := t.attach(hello.WorkerAddr, c, false, at, from); err != nil {
		t.stats.refused.Add(1)
		if err == errTooManyPeers {
			t.admissionDropped(from)
		} else {
			t.badFrame() // an address UCX could not take
			logUnusableAddress(hello.UCX, err)
		}
		return
	}
	if t.isClosed() || l.isClosed() {
		t.removeConn(c)
		t.refuse(c.peer(), hello.ConnID, stream.RefuseNoListener)
		return
	}
	if c.auth != nil && !t.awaitProof(l, c, hello, payload) {
		return
	}
	if c.auth == nil {
		t.noteConnect(c, hello, payload)
		if !l.enqueue(c) {
			t.refuseConn(c, hello.ConnID, stream.RefuseBacklog)
			return
		}
		// Counted before the ACCEPT goes: Accept may return c, and the
		// dialer use it, before this goroutine runs again.
		t.stats.accepts.Add(1)
	}
	t.sendAccept(c, hello.Name)
}

// awaitProof sets c, an accepted conn of the keyed listener l, to wait for
// its dialer's proof, within the bounds on such conns; false if c was
// dropped instead (its dialer at its bound: no answer, and the dialer
// sends the CONNECT again).
func (t *Transport) awaitProof(l *Listener, c *Conn, hello stream.Hello, payload []byte) bool {
	evicted := l.addPendingAuth(c)
	if evicted == c {
		t.stats.connectsDropped.Add(1)
		c.terminate(withDetail(ErrRefused, "too many handshakes of its dialer waiting"), EndQuiet)
		return false
	}
	t.noteConnect(c, hello, payload)
	if evicted != nil {
		t.authFailed()
		evicted.terminate(withDetail(ErrRefused, "dropped unproven handshake: too many waiting"), EndReset(stream.RstAbort, RSTAlways))
	}
	// The conn waits for the dialer's proof; it reaches Accept only then.
	time.AfterFunc(authTimeout, func() {
		c.mu.Lock()
		pending := c.state.Phase == PhaseAuthPending
		c.mu.Unlock()
		if pending {
			t.authFailed()
			c.terminate(withDetail(ErrRefused, "no authentication within %v", authTimeout), EndReset(stream.RstAbort, RSTAlways))
		}
	})
	return true
}

// keyedAdmit decides, for a CONNECT to a keyed listener, whether to spend
// a conn and a key exchange on it: it must carry a challenge (else it is
// refused), and fit the budget for unproven handshakes (else it gets no
// answer; a sender that keeps on past the budget is failed as a flooder).
func (t *Transport) keyedAdmit(at *shard, hello stream.Hello, from uintptr) bool {
	if len(hello.Nonce) != auth.ChallengeLen {
		t.authFailed()
		t.refuseAddr(at, from, hello.WorkerAddr, hello.ConnID, stream.RefuseAuth) // a dialer without a key
		return false
	}
	now := time.Now()
	ok, flood := t.hsBudget.allow(from, now)
	if !ok {
		t.stats.connectsDropped.Add(1)
		if flood {
			t.floodedFrom(at, from, now.UnixNano())
		}
	}
	return ok
}

// admissionDropped notes a CONNECT from the endpoint from that the
// admission of endpoints dropped (admit.go). An endpoint that keeps
// naming addresses it drops (forged ones) has its CONNECTs dropped
// undecoded for a while; no peer is failed: the one it made is not its
// own endpoint, and another would be made from its next address.
func (t *Transport) admissionDropped(from uintptr) {
	if now := time.Now(); from != 0 && t.hsBudget.dropped(from, now) {
		t.stats.peersFlooded.Add(1)
		t.flooded.addFrom(from, now)
	}
}

// acceptedConn makes the listener side of the conn that hello, a CONNECT's,
// asks l for, on shard s: open, or waiting for the dialer's proof when l
// has a key. It is bound to no endpoint yet: the first frame for it does
// that (learnFrom).
func (t *Transport) acceptedConn(l *Listener, hello stream.Hello, s *shard) *Conn {
	c := newConn(t, nil, Addr{Name: hello.Name}, Addr{Name: displayName(hello.LocalName), ID: hello.ConnID}, preAcceptWindow)
	c.remoteID = hello.ConnID
	c.sh = s
	c.workers = t.multi() && hello.Features&stream.FeatureWorkers != 0
	c.learnFrom = true
	c.keepAlive = keepAliveOf(l.ka)
	c.frame = min(t.cfg.EagerMax, int(hello.EagerMax))
	c.peerSegs = PeerSegLimits(hello)
	c.swin.Update(uint64(hello.Window))
	c.state.Phase = PhaseOpen
	if l.psk != nil {
		c.state.Phase = PhaseAuthPending
		c.auth = newListenAuth(l.psk, hello.Name, hello.Nonce, l)
	}
	return c
}

// sendAccept answers the CONNECT that made c, for the listener name, with
// ACCEPT; c fails if it cannot be sent.
func (t *Transport) sendAccept(c *Conn, name string) {
	reply := stream.Hello{ConnID: c.id, EagerMax: uint32(t.cfg.EagerMax), Window: uint32(min(preAcceptWindow, t.cfg.Window)),
		Name: name, LocalName: name, ShmFrame: uint32(t.shmFrame), TCPFrame: uint32(t.tcpFrame), UCX: UCX().Version,
		Proc: selfProc()}
	if c.workers {
		// The dialer continues the conn with the worker that sends this.
		reply.Features = stream.FeatureWorkers
		reply.WorkerAddr = c.sh.eng.Address()
	}
	if c.auth != nil {
		// Only our nonce: we prove nothing over the dialer's input until
		// the dialer has proven it knows the key.
		reply.Nonce = c.auth.challenge()
	}
	if err := t.sendHello(c.peer(), stream.Header{Kind: stream.KindAccept, ConnID: c.remoteID}, reply); err != nil {
		c.terminate(withDetail(ErrReset, "sending ACCEPT: %v", err), EndQuiet)
	}
}

// refuseAddr answers a CONNECT from the worker at addr, which arrived on
// at from the endpoint from, with REFUSE(code), on an existing endpoint
// or on a new one that the idle-peer sweep closes soon. With too many
// such endpoints already, the dialer gets no answer (its dial fails when
// no answer comes: see Config.KeepAlive).
func (t *Transport) refuseAddr(at *shard, from uintptr, addr []byte, dialerID uint64, code stream.RefuseCode) {
	p, err := t.refusePeer(at, addr, from)
	if err != nil {
		t.stats.refused.Add(1)
		if err != errTooManyPeers {
			t.badFrame()
		}
		return
	}
	t.refuse(p, dialerID, code)
}

// refuse answers a dialer's conn dialerID with REFUSE(code), and counts it.
func (t *Transport) refuse(p *peer, dialerID uint64, code stream.RefuseCode) {
	t.stats.refused.Add(1)
	t.logHostile("ucxnet: refused a CONNECT", "reason", code.String())
	_ = t.sendCtl(p, stream.Header{Kind: stream.KindRefuse, ConnID: dialerID, Aux: uint64(code)})
}

// handleHandshake takes the listener's ACCEPT or REFUSE (dial side, engine
// goroutine).
func (c *Conn) handleHandshake(h stream.Header, payload []byte, from uintptr) {
	c.sh.owner.check()
	var hello stream.Hello
	var helloErr error
	if h.Kind == stream.KindAccept {
		hello, helloErr = c.acceptHello(payload, from)
	}
	c.mu.Lock()
	state := c.state.Phase
	if state != PhaseDialing && state != PhaseAbandoned || h.Kind == stream.KindAccept && c.auth != nil && c.auth.proving {
		again := h.Kind == stream.KindAccept && helloErr == nil && c.remoteID != 0 && hello.ConnID == c.remoteID
		c.mu.Unlock()
		if !again { // the listener's answer to a CONNECT sent again is no fault
			c.t.badFrame()
		}
		return
	}
	c.from = from // the listener's frames for this conn come from there from now on
	if h.Kind == stream.KindRefuse || helloErr != nil {
		c.endHandshake(h, hello.ConnID, helloErr, from)
		return
	}
	c.remoteID = hello.ConnID
	c.raddr.ID = hello.ConnID // before Dial returns c (it waits for dialDone)
	c.frame = min(c.t.cfg.EagerMax, int(hello.EagerMax))
	c.peerSegs = PeerSegLimits(hello)
	c.swin.Update(uint64(hello.Window))
	if state == PhaseAbandoned {
		c.mu.Unlock()
		c.terminate(net.ErrClosed, EndReset(stream.RstAbort, RSTAlways))
		return
	}
	a := c.auth
	var authErr error
	switch {
	case a.hs == nil && hello.Nonce != nil:
		authErr = withDetail(ErrRefused, "listener %q requires a pre-shared key", a.name)
	case a.hs != nil && hello.Nonce == nil:
		authErr = withDetail(ErrRefused, "listener %q did not authenticate (it has no pre-shared key)", a.name)
	}
	if authErr != nil {
		c.mu.Unlock()
		// Counted and logged after Unlock: the Logger's handler may
		// read the conn's stats.
		c.t.authFailed()
		c.terminate(authErr, EndReset(stream.RstAbort, RSTAlways)) // the dial fails with it
		return
	}
	if a.hs == nil {
		c.state.Phase = PhaseOpen
		close(c.dialDone)
		c.mu.Unlock()
		// The listener's conn is bound by the first frame for it
		// (learnFrom): send one now, the window the CONNECT offered (a
		// no-op for the flow), before the conn id reaches anyone else.
		c.sendWindow(uint64(c.t.cfg.Window))
		return
	}
	// Prove we know the key; the dial completes on the listener's proof
	// (handleAuth).
	a.hs.SetListenerChallenge(hello.Nonce)
	a.proving = true
	mac, err := a.hs.Proof(auth.Dialer, c.id, c.remoteID)
	if err != nil {
		c.mu.Unlock()
		c.t.authFailed()
		c.terminate(withDetail(ErrRefused, "listener %q: %v", a.name, err), EndReset(stream.RstAbort, RSTAlways))
		return
	}
	proof := stream.Hello{ConnID: c.id, EagerMax: uint32(c.t.cfg.EagerMax), Window: uint32(c.t.cfg.Window), MAC: mac}
	c.mu.Unlock()
	if err := c.t.sendHello(c.peer(), stream.Header{Kind: stream.KindAuth, ConnID: c.remoteID}, proof); err != nil {
		c.terminate(withDetail(ErrRefused, "sending AUTH: %v", err), EndQuiet)
	}
}

// endHandshake ends c's dial on a REFUSE, or on an ACCEPT (naming the
// listener's conn listenerID, from the endpoint from) refused for
// helloErr, which gets an RST (resetAccept). c.mu is held; it is released.
func (c *Conn) endHandshake(h stream.Header, listenerID uint64, helloErr error, from uintptr) {
	if h.Kind == stream.KindRefuse {
		c.terminateLocked(withDetail(ErrRefused, "listener %q refused: %v", c.raddr.Name, stream.RefuseCode(h.Aux)), EndQuiet)
		c.mu.Unlock()
		c.t.removeConn(c)
		c.t.markUnanswered(c)
		return
	}
	c.terminateLocked(withDetail(ErrProtocol, "bad ACCEPT: %v", helloErr), EndQuiet)
	c.mu.Unlock()
	c.t.removeConn(c)
	c.t.resetAccept(c, listenerID, from, errors.Is(helloErr, errAcceptRefused))
}

// errAcceptRefused: the worker address an ACCEPT names is refused.
var errAcceptRefused = errors.New("worker address refused")

// resetAccept answers an ACCEPT that c, a dial, refused with
// RST(RstUnknownConn) naming the listener's conn listenerID, so that the
// listener resets the conn it queued: through the peer whose frames come
// from the ACCEPT's endpoint from, else, when the ACCEPT's worker address
// was not refused (rebound), through c's own peer, the one its CONNECT
// went through. c is out of the conn table.
func (t *Transport) resetAccept(c *Conn, listenerID uint64, from uintptr, rebindRefused bool) {
	if listenerID == 0 {
		return
	}
	t.mu.RLock()
	p := c.sh.peersByFrom[from]
	if p == nil && !rebindRefused {
		p = c.peer()
	}
	t.mu.RUnlock()
	if p == nil {
		return
	}
	t.stats.resetsSent.Add(1)
	_ = t.sendCtl(p, stream.Header{Kind: stream.KindRst, ConnID: listenerID, Aux: uint64(stream.RstUnknownConn)})
}

// acceptHello decodes the Hello of c's ACCEPT, which came from the
// endpoint from, and checks its limits. If it says
// stream.FeatureWorkers and c offered it, c moves to the listener's worker
// that the Hello names (rebindAccept), if c still waits for its answer.
// Engine goroutine; c.mu is not held.
func (c *Conn) acceptHello(payload []byte, from uintptr) (stream.Hello, error) {
	var hello stream.Hello
	if err := hello.UnmarshalBinary(payload); err != nil {
		return hello, err
	}
	if err := checkPeerLimits(hello); err != nil {
		return hello, err
	}
	if !c.workers || hello.Features&stream.FeatureWorkers == 0 {
		return hello, nil
	}
	c.mu.Lock()
	dialing := c.state.Phase == PhaseDialing || c.state.Phase == PhaseAbandoned
	c.mu.Unlock()
	if !dialing {
		return hello, nil
	}
	if err := c.t.rebindAccept(c, hello.WorkerAddr, from); err != nil {
		c.t.badFrame()
		c.t.logHostile("ucxnet: refused an ACCEPT's worker address", "reason", err.Error())
		return hello, fmt.Errorf("%w: %w", errAcceptRefused, err)
	}
	return hello, nil
}

// handleAuth takes the AUTH step of a pre-shared-key handshake: the
// dialer's proof at the listener, or the listener's proof at the dialer
// (engine goroutine).
func (c *Conn) handleAuth(h stream.Header, payload []byte) {
	if h.Flags&stream.FlagReply != 0 {
		c.handleListenerProof(payload)
		return
	}
	c.mu.Lock()
	a := c.auth
	if c.state.Phase != PhaseAuthPending || a == nil { // at the listener: the proof
		c.mu.Unlock()
		c.t.badFrame()
		return
	}
	var hello stream.Hello
	ok := hello.UnmarshalBinary(payload) == nil && a.hs.Verify(auth.Dialer, hello.MAC, c.remoteID, c.id)
	if !ok {
		c.terminateLocked(withDetail(ErrRefused, "dialer failed authentication"), EndQuiet)
		c.mu.Unlock()
		c.t.authFailed()
		c.t.refuse(c.peer(), c.remoteID, stream.RefuseAuth)
		c.t.removeConn(c)
		return
	}
	c.state.Phase = PhaseOpen
	c.mu.Unlock()
	c.t.hsBudget.proved(a.connectFrom)
	c.t.mu.Lock()
	c.t.noteFromLocked(c.peer(), c)
	c.t.mu.Unlock()
	a.ln.removePendingAuth(c)
	if !a.ln.enqueue(c) {
		code := stream.RefuseBacklog
		if a.ln.isClosed() {
			code = stream.RefuseNoListener
		}
		c.terminate(withDetail(ErrRefused, "%v", code), EndQuiet)
		c.t.refuse(c.peer(), c.remoteID, code)
		return
	}
	c.t.stats.accepts.Add(1)
	mac, _ := a.hs.Proof(auth.Listener, c.remoteID, c.id) // the dialer's proof checked out: ISK is known
	reply := stream.Hello{ConnID: c.id, EagerMax: uint32(c.t.cfg.EagerMax), Window: uint32(min(preAcceptWindow, c.t.cfg.Window)),
		MAC: mac}
	_ = c.t.sendHello(c.peer(), stream.Header{Kind: stream.KindAuth, Flags: stream.FlagReply, ConnID: c.remoteID}, reply)
}

// handleListenerProof takes the listener's AUTH reply at the dialer: its
// proof that it knows the key too. The dial completes only if it checks out.
func (c *Conn) handleListenerProof(payload []byte) {
	c.mu.Lock()
	a := c.auth
	if a == nil || !a.proving || c.state.Phase != PhaseDialing && c.state.Phase != PhaseAbandoned {
		c.mu.Unlock()
		c.t.badFrame()
		return
	}
	if c.state.Phase == PhaseAbandoned {
		// The dial gave up meanwhile: reset the listener's conn.
		c.mu.Unlock()
		c.terminate(net.ErrClosed, EndReset(stream.RstAbort, RSTAlways))
		return
	}
	var hello stream.Hello
	ok := hello.UnmarshalBinary(payload) == nil && a.hs.Verify(auth.Listener, hello.MAC, c.id, c.remoteID)
	if !ok {
		c.mu.Unlock()
		c.t.authFailed()
		c.terminate(withDetail(ErrRefused, "listener %q failed authentication: wrong pre-shared key", a.name), EndReset(stream.RstAbort, RSTAlways))
		return
	}
	c.state.Phase = PhaseOpen
	close(c.dialDone)
	c.mu.Unlock()
}

// stashEarly keeps a DATA, FIN, WINDOW, RST or PING frame that came for a
// dialing conn before its ACCEPT bound it (within Early's bounds); it
// reports whether it took the frame, kept or not. Engine goroutine.
func (c *Conn) stashEarly(h stream.Header, ev *engine.Event) bool {
	c.sh.owner.check()
	switch h.Kind {
	case stream.KindAccept, stream.KindRefuse, stream.KindAuth:
		return false
	}
	c.mu.Lock()
	dialing := c.state.Phase == PhaseDialing
	c.mu.Unlock()
	if !dialing {
		return false
	}
	c.early.Stash(h, ev, int(c.in.Size()))
	return true
}

// replayEarly hands the frames kept by stashEarly to the conn, now that
// its ACCEPT bound it; those from another endpoint are dropped and
// counted. If frames from the ACCEPT's endpoint were over the bounds and
// not kept, the stream has a gap that nothing fills: the conn fails with
// ECONNRESET after the frames kept, and the listener gets an RST. Engine
// goroutine.
func (c *Conn) replayEarly() {
	c.sh.owner.check()
	for _, f := range c.early.Take() {
		if f.From != c.from || c.from == 0 {
			c.t.foreignFrame()
			continue
		}
		ev := engine.Event{Kind: engine.Frame, Data: f.Data, DataLen: len(f.Data), From: f.From}
		c.handleFrame(f.Header, &ev)
	}
	if c.from == 0 {
		return
	}
	if lost := c.early.Lost(c.from); lost != 0 {
		why := withDetail(ErrReset, "%d frames that came before the ACCEPT were over what a dial keeps (%d frames, a window of data)", lost, MaxEarly)
		if lost < 0 {
			why = withDetail(ErrReset, "frames that came before the ACCEPT were lost (from more than %d endpoints)", maxEarlyLost)
		}
		c.t.logEvent(slog.LevelWarn, "ucxnet: conn reset: its first frames overflowed", "conn", c.id, "reason", why.Error())
		c.terminate(why, EndPolicy{RST: RSTAlways, Code: stream.RstAbort})
	}
}

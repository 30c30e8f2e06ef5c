package session

import (
	"errors"
	"fmt"
	"log/slog"
	"net"

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

// handshake is a conn's opening, both ways (PROTOCOL.md §5):
// the dial's CONNECT and its answer, the listener's ACCEPT or REFUSE, the
// pre-shared-key proofs, and the frames that came before the answer.
type handshake struct {
	c        *Conn
	dialDone chan struct{} // closed when a dial is answered
	auth     *authState    // pre-shared-key handshake state, if any
	// workers: both sides run several workers (stream.FeatureWorkers):
	// the ACCEPT names the listener's worker that carries the conn. Set
	// before the conn is in the conn table.
	workers bool
	// early holds frames that came before the ACCEPT (engine goroutine).
	early Early
	// connect is what an accepted conn keeps of the CONNECT that made it,
	// to answer it again if it is repeated (resend.go). Set under
	// Transport.mu once the conn is in the conn table; the pointer is
	// then read-only, what it points to is under Transport.mu.
	connect *connectOf
}

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
func (hs *handshake) sendConnect(name string) error {
	c := hs.c
	t := c.t
	hello := stream.Hello{
		ConnID: c.id, EagerMax: uint32(t.cfg.EagerMax), Window: uint32(t.cfg.Window),
		Name: name, LocalName: t.name, WorkerAddr: c.sh.eng.Address(), Nonce: c.hs.auth.challenge(),
		ShmFrame: uint32(t.shmFrame), TCPFrame: uint32(t.tcpFrame), UCX: t.lib.Version, Proc: selfProc(),
	}
	if c.hs.workers {
		hello.Features = stream.FeatureWorkers
	}
	c.mu.Lock()
	p := c.peer() // a resend may go through another endpoint (refreshDial)
	c.mu.Unlock()
	return p.sendHello(stream.Header{Kind: stream.KindConnect}, hello)
}

// sendHello sends a handshake frame whose payload is hello.
func (p *peer) sendHello(h stream.Header, hello stream.Hello) error {
	b, err := hello.MarshalBinary()
	if err != nil {
		return err
	}
	h.Length = uint32(len(b))
	hb := h.Bytes()
	_, _, err = p.send(engine.Frames{Header: hb[:], Data: b})
	return err
}

// sendAccept answers the CONNECT that made c, for the listener name, with
// ACCEPT; c fails if it cannot be sent.
func (hs *handshake) sendAccept(name string) {
	c := hs.c
	t := c.t
	reply := stream.Hello{ConnID: c.id, EagerMax: uint32(t.cfg.EagerMax), Window: uint32(min(preAcceptWindow, t.cfg.Window)),
		Name: name, LocalName: name, ShmFrame: uint32(t.shmFrame), TCPFrame: uint32(t.tcpFrame), UCX: t.lib.Version,
		Proc: selfProc()}
	if c.hs.workers {
		// The dialer continues the conn with the worker that sends this.
		reply.Features = stream.FeatureWorkers
		reply.WorkerAddr = c.sh.eng.Address()
	}
	if c.hs.auth != nil {
		// Only our nonce: we prove nothing over the dialer's input until
		// the dialer has proven it knows the key.
		reply.Nonce = c.hs.auth.challenge()
	}
	if err := c.peer().sendHello(stream.Header{Kind: stream.KindAccept, ConnID: c.remoteID}, reply); err != nil {
		c.terminate(withDetail(ErrReset, "sending ACCEPT: %v", err), EndQuiet)
	}
}

// handleHandshake takes the listener's ACCEPT or REFUSE (dial side, engine
// goroutine).
func (hs *handshake) handleHandshake(h stream.Header, payload []byte, from uintptr) {
	c := hs.c
	c.sh.owner.check()
	var hello stream.Hello
	var helloErr error
	if h.Kind == stream.KindAccept {
		hello, helloErr = c.hs.acceptHello(payload, from)
	}
	c.mu.Lock()
	state := c.state.Phase
	if state != PhaseDialing && state != PhaseAbandoned || h.Kind == stream.KindAccept && c.hs.auth != nil && c.hs.auth.proving {
		again := h.Kind == stream.KindAccept && helloErr == nil && c.remoteID != 0 && hello.ConnID == c.remoteID
		c.mu.Unlock()
		if !again { // the listener's answer to a CONNECT sent again is no fault
			c.t.log.badFrame()
		}
		return
	}
	c.from = from // the listener's frames for this conn come from there from now on
	if h.Kind == stream.KindRefuse || helloErr != nil {
		c.hs.endHandshake(h, hello.ConnID, helloErr, from)
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
	a := c.hs.auth
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
		c.t.log.authFailed()
		c.terminate(authErr, EndReset(stream.RstAbort, RSTAlways)) // the dial fails with it
		return
	}
	if a.hs == nil {
		c.state.Phase = PhaseOpen
		close(c.hs.dialDone)
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
		c.t.log.authFailed()
		c.terminate(withDetail(ErrRefused, "listener %q: %v", a.name, err), EndReset(stream.RstAbort, RSTAlways))
		return
	}
	proof := stream.Hello{ConnID: c.id, EagerMax: uint32(c.t.cfg.EagerMax), Window: uint32(c.t.cfg.Window), MAC: mac}
	c.mu.Unlock()
	if err := c.peer().sendHello(stream.Header{Kind: stream.KindAuth, ConnID: c.remoteID}, proof); err != nil {
		c.terminate(withDetail(ErrRefused, "sending AUTH: %v", err), EndQuiet)
	}
}

// endHandshake ends c's dial on a REFUSE, or on an ACCEPT (naming the
// listener's conn listenerID, from the endpoint from) refused for
// helloErr, which gets an RST (resetAccept). c.mu is held; it is released.
func (hs *handshake) endHandshake(h stream.Header, listenerID uint64, helloErr error, from uintptr) {
	c := hs.c
	if h.Kind == stream.KindRefuse {
		c.mu.Unlock()
		c.terminate(withDetail(ErrRefused, "listener %q refused: %v", c.raddr.Name, stream.RefuseCode(h.Aux)), EndQuiet)
		c.hs.markUnanswered()
		return
	}
	c.mu.Unlock()
	c.terminate(withDetail(ErrProtocol, "bad ACCEPT: %v", helloErr), EndQuiet)
	c.hs.resetAccept(listenerID, from, errors.Is(helloErr, errAcceptRefused))
}

// errAcceptRefused: the worker address an ACCEPT names is refused.
var errAcceptRefused = errors.New("worker address refused")

// resetAccept answers an ACCEPT that c, a dial, refused with
// RST(RstUnknownConn) naming the listener's conn listenerID, so that the
// listener resets the conn it queued: through the peer whose frames come
// from the ACCEPT's endpoint from, else, when the ACCEPT's worker address
// was not refused (rebound), through c's own peer, the one its CONNECT
// went through. c is out of the conn table.
func (hs *handshake) resetAccept(listenerID uint64, from uintptr, rebindRefused bool) {
	c := hs.c
	t := c.t
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
	_ = p.sendCtl(stream.Header{Kind: stream.KindRst, ConnID: listenerID, Aux: uint64(stream.RstUnknownConn)})
}

// acceptHello decodes the Hello of c's ACCEPT, which came from the
// endpoint from, and checks its limits. If it says
// stream.FeatureWorkers and c offered it, c moves to the listener's worker
// that the Hello names (rebindAccept), if c still waits for its answer.
// Engine goroutine; c.mu is not held.
func (hs *handshake) acceptHello(payload []byte, from uintptr) (stream.Hello, error) {
	c := hs.c
	var hello stream.Hello
	if err := hello.UnmarshalBinary(payload); err != nil {
		return hello, err
	}
	if err := checkPeerLimits(hello); err != nil {
		return hello, err
	}
	if !c.hs.workers || hello.Features&stream.FeatureWorkers == 0 {
		return hello, nil
	}
	c.mu.Lock()
	dialing := c.state.Phase == PhaseDialing || c.state.Phase == PhaseAbandoned
	c.mu.Unlock()
	if !dialing {
		return hello, nil
	}
	if err := c.sh.rebindAccept(c, hello.WorkerAddr, from); err != nil {
		c.t.log.badFrame()
		c.t.log.hostile("ucxnet: refused an ACCEPT's worker address", "reason", err.Error())
		return hello, fmt.Errorf("%w: %w", errAcceptRefused, err)
	}
	return hello, nil
}

// handleAuth takes the AUTH step of a pre-shared-key handshake: the
// dialer's proof at the listener, or the listener's proof at the dialer
// (engine goroutine).
func (hs *handshake) handleAuth(h stream.Header, payload []byte) {
	c := hs.c
	if h.Flags&stream.FlagReply != 0 {
		c.hs.handleListenerProof(payload)
		return
	}
	c.mu.Lock()
	a := c.hs.auth
	if c.state.Phase != PhaseAuthPending || a == nil { // at the listener: the proof
		c.mu.Unlock()
		c.t.log.badFrame()
		return
	}
	var hello stream.Hello
	ok := hello.UnmarshalBinary(payload) == nil && a.hs.Verify(auth.Dialer, hello.MAC, c.remoteID, c.id)
	if !ok {
		c.mu.Unlock()
		c.t.log.authFailed()
		c.terminate(withDetail(ErrRefused, "dialer failed authentication"), EndQuiet)
		c.peer().refuse(c.remoteID, stream.RefuseAuth)
		return
	}
	c.state.Phase = PhaseOpen
	c.mu.Unlock()
	c.t.hsBudget.proved(a.connectFrom)
	c.t.mu.Lock()
	c.peer().noteFromLocked(c)
	c.t.mu.Unlock()
	a.ln.removePendingAuth(c)
	if !a.ln.enqueue(c) {
		code := stream.RefuseBacklog
		if a.ln.isClosed() {
			code = stream.RefuseNoListener
		}
		c.terminate(withDetail(ErrRefused, "%v", code), EndQuiet)
		c.peer().refuse(c.remoteID, code)
		return
	}
	c.t.stats.accepts.Add(1)
	mac, _ := a.hs.Proof(auth.Listener, c.remoteID, c.id) // the dialer's proof checked out: ISK is known
	reply := stream.Hello{ConnID: c.id, EagerMax: uint32(c.t.cfg.EagerMax), Window: uint32(min(preAcceptWindow, c.t.cfg.Window)),
		MAC: mac}
	_ = c.peer().sendHello(stream.Header{Kind: stream.KindAuth, Flags: stream.FlagReply, ConnID: c.remoteID}, reply)
}

// handleListenerProof takes the listener's AUTH reply at the dialer: its
// proof that it knows the key too. The dial completes only if it checks out.
func (hs *handshake) handleListenerProof(payload []byte) {
	c := hs.c
	c.mu.Lock()
	a := c.hs.auth
	if a == nil || !a.proving || c.state.Phase != PhaseDialing && c.state.Phase != PhaseAbandoned {
		c.mu.Unlock()
		c.t.log.badFrame()
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
		c.t.log.authFailed()
		c.terminate(withDetail(ErrRefused, "listener %q failed authentication: wrong pre-shared key", a.name), EndReset(stream.RstAbort, RSTAlways))
		return
	}
	c.state.Phase = PhaseOpen
	close(c.hs.dialDone)
	c.mu.Unlock()
}

// stashEarly keeps a DATA, FIN, WINDOW, RST or PING frame that came for a
// dialing conn before its ACCEPT bound it (within Early's bounds); it
// reports whether it took the frame, kept or not. Engine goroutine.
func (hs *handshake) stashEarly(h stream.Header, ev *engine.Event) bool {
	c := hs.c
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
	c.hs.early.Stash(h, ev, int(c.in.Size()))
	return true
}

// replayEarly hands the frames kept by stashEarly to the conn, now that
// its ACCEPT bound it; those from another endpoint are dropped and
// counted. If frames from the ACCEPT's endpoint were over the bounds and
// not kept, the stream has a gap that nothing fills: the conn fails with
// ECONNRESET after the frames kept, and the listener gets an RST. Engine
// goroutine.
func (hs *handshake) replayEarly() {
	c := hs.c
	c.sh.owner.check()
	for _, f := range c.hs.early.Take() {
		if f.From != c.from || c.from == 0 {
			c.t.log.foreignFrame()
			continue
		}
		ev := engine.Event{Kind: engine.Frame, Data: f.Data, DataLen: len(f.Data), From: f.From}
		c.handleFrame(f.Header, &ev)
	}
	if c.from == 0 {
		return
	}
	if lost := c.hs.early.Lost(c.from); lost != 0 {
		why := withDetail(ErrReset, "%d frames that came before the ACCEPT were over what a dial keeps (%d frames, a window of data)", lost, MaxEarly)
		if lost < 0 {
			why = withDetail(ErrReset, "frames that came before the ACCEPT were lost (from more than %d endpoints)", maxEarlyLost)
		}
		c.t.log.event(slog.LevelWarn, "ucxnet: conn reset: its first frames overflowed", "conn", c.id, "reason", why.Error())
		c.terminate(why, EndPolicy{RST: RSTAlways, Code: stream.RstAbort})
	}
}

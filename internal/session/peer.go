package session

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ucxnet/ucxnet/internal/engine"
)

// peer is a remote worker and the one endpoint to it that all conns to
// it on one shard share.
type peer struct {
	sh    *shard // the shard whose worker the endpoint belongs to
	addr  string
	ep    engine.EP
	conns map[uint64]*Conn // under Transport.mu
	// from is the From of its frames, learnt from its conns' handshakes
	// (0: not yet): written under Transport.mu, read by anyone.
	from atomic.Uintptr
	info atomic.Pointer[[]string]

	sp atomic.Pointer[SendPath] // how to send, chosen from the transports (nil: not yet)

	epMu sync.RWMutex // held (shared) while ep is used, so it is not closed under a user
	gone bool         // ep is closed or closing (under epMu)
	// closing is gone for those that hold the worker instead of epMu
	// (sendQueued): set before the endpoint's close takes the worker.
	closing atomic.Bool
	// outQ lists the conns whose open frame (coalesce.go) waits to be
	// sent, outSpare is sendQueued's swap buffer (both under
	// shard.out.mu).
	outQ, outSpare []*Conn

	// Liveness (see Config.KeepAlive), in UnixNano.
	lastRecv atomic.Int64 // when a frame from the peer last arrived (or the peer was made)
	lastPing atomic.Int64 // when we last sent it a PING
	rttProbe atomic.Int64 // when the PING not yet answered was sent (0: none)
	rtt      atomic.Int64 // the round trip of the last answered PING, ns (ConnStats.RTT)
	// idleSince is when the peer's last conn left (or the peer was made
	// without one), under Transport.mu; hadConns says whether it ever had
	// one. The sweep closes endpoints idle too long.
	idleSince time.Time
	hadConns  bool
	// replace: a dial through it got a REFUSE or no answer while none of
	// its conns was answered (under Transport.mu). The listener closes an
	// endpoint it made only to refuse, and UCX pairs the two ends, so this
	// end may send into nothing: the next dial replaces it unless a conn
	// of it was answered or is still dialing (replaceLocked).
	replace bool
	// refusedFrom is the From of the CONNECT that a peer without conns was
	// made to refuse (under Transport.mu; see remadeLocked).
	refusedFrom uintptr
	// ka is the tightest keepalive of the conns it had since it last had
	// none (under Transport.mu); off: not checked.
	ka KeepAlive
	// dialed counts its conns that this side dialed (under
	// Transport.mu): the dialing side probes first (see sweep.once).
	dialed int

	// pongs is the PING answer budget (see allowPong); pingsDropped
	// counts the PINGs that found it empty. Engine goroutine only.
	pongs        Bucket
	pingsDropped atomic.Uint64
	// ingress is the budget for frames that carry no stream data
	// (ingress.go), under ingressMu; flooding is set once it ran out and
	// the peer is being failed.
	ingressMu sync.Mutex
	ingress   Bucket
	flooding  atomic.Bool

	// madeBy is the From of the CONNECT whose address made this peer (0:
	// a dial made it, or a CONNECT whose sender was not known), and
	// madeAt the shard that CONNECT arrived on, under Transport.mu (see
	// admit.go).
	madeBy uintptr
	madeAt *shard

	// unflushed counts payload bytes UCX did not send at once (it keeps
	// copies of them) since the last flush that bounded what UCX may hold
	// for this peer (Conn.drainPeer).
	unflushed atomic.Int64
}

// path returns how to send on this peer's endpoint, chosen once from the
// UCX transports that carry it (ChoosePath).
func (p *peer) path(t *Transport) SendPath {
	if sp := p.sp.Load(); sp != nil {
		return *sp
	}
	var tl []string
	_ = p.use(func(ep engine.EP) error {
		tl = p.sh.eng.Stats(ep).Transports
		return nil
	})
	sp := ChoosePath(tl, PathConfig{ShmFrame: t.shmFrame, TCPFrame: t.tcpFrame,
		FrameSize: t.cfg.FrameSize, CopyWrites: t.cfg.CopyWrites})
	if sp.Known {
		p.sp.Store(&sp)
	}
	return sp
}

// PING answers per peer: at most pongBurst at once and pongRate a second
// after that. An honest peer probes once per keepalive sweep (at most
// every engine.TickEvery, per peer, not per conn); a peer that sends more
// is flooding, and answering each PING 1:1 let it take the engine (and
// the wire) from every other conn.
const (
	pongRate  = 20
	pongBurst = 20
)

// allowPong takes one PING answer from p's budget at now (UnixNano), and
// reports whether there was one; a PING without is dropped and counted.
// Engine goroutine.
func (p *peer) allowPong(now int64) bool {
	p.sh.owner.check()
	if !p.pongs.Take(time.Unix(0, now), pongBurst, pongRate) {
		p.pingsDropped.Add(1)
		return false
	}
	return true
}

// errPeerGone reports a send on an endpoint that was closed.
var errPeerGone = withDetail(ErrReset, "endpoint to the peer is closed")

// use runs f with the peer's endpoint, unless it is closed.
func (p *peer) use(f func(ep engine.EP) error) error {
	p.epMu.RLock()
	defer p.epMu.RUnlock()
	if p.gone {
		return errPeerGone
	}
	return f(p.ep)
}

// close closes p's endpoint once, whoever asks first (a failure on
// the engine goroutine, or Close).
func (p *peer) close(force bool) {
	t := p.sh.t
	t.mu.Lock()
	p.sh.forgetPeerLocked(p)
	t.mu.Unlock()
	p.closeEP(force)
}

// closeEP closes p's endpoint once; p is already out of the peer tables.
func (p *peer) closeEP(force bool) {
	p.epMu.Lock()
	defer p.epMu.Unlock()
	if p.gone {
		return
	}
	p.gone = true
	p.closing.Store(true)
	w := p.sh.acquire() // sends the queued frames, but p's (closing)
	_ = w.CloseEP(p.ep, force)
	p.sh.giveBack(w)
}

// errTooManyPeers means a CONNECT would need an endpoint beyond what
// CONNECTs may make: one more without conns than maxIdlePeers allows, or
// one over the admission budget (admit.go). The CONNECT is dropped
// unanswered.
var errTooManyPeers = errors.New("ucxnet: CONNECT over the endpoint budget")

// errClaimedAddr means a CONNECT named the worker address of a peer with
// conns whose frames come from another endpoint than the CONNECT's (a peer
// of the shard the CONNECT arrived on).
var errClaimedAddr = errors.New("ucxnet: CONNECT from another endpoint than the named worker's")

// claimedLocked reports whether a handshake frame from the endpoint from
// that names p's worker address claims it: p has bound conns other than
// self (nil for a CONNECT), and its frames come from another endpoint.
// Dials waiting for their answer, abandoned ones included, are bound to
// nothing and claim nothing. A peer without bound conns holds at most a
// stale From (its worker replaced its endpoint to us, as an idle sweep
// does): the frame then claims nothing, and a conn bound through p's
// endpoint notes the new From (noteFromLocked). t.mu is held, on the
// engine goroutine of p's shard (conns' From).
func claimedLocked(p *peer, from uintptr, self *Conn) bool {
	if p == nil {
		return false
	}
	held(&p.sh.t.mu, "claimedLocked needs Transport.mu")
	p.sh.owner.check()
	if f := p.from.Load(); f == 0 || f == from {
		return false
	}
	for _, q := range p.conns {
		if q != self && q.from != 0 {
			return true
		}
	}
	return false
}

// refusePeer returns the peer of shard s for a packed worker address, to
// answer with a REFUSE a CONNECT from it that arrived on s from the
// endpoint from, creating its endpoint if need be, within the admission
// budget (admit.go) and with at most maxIdlePeers endpoints without
// conns. The engine validates the address before UCX sees it (UCX aborts
// the process on a malformed one).
func (s *shard) refusePeer(addr []byte, from uintptr) (*peer, error) {
	t := s.t
	t.mu.Lock()
	defer t.mu.Unlock()
	p, err := s.peerForLocked(addr, false, nil, from)
	if err == nil && !p.hadConns {
		p.refusedFrom = from
	}
	return p, err
}

// peerForLocked returns the peer of shard s for a packed worker address,
// creating its endpoint if need be: for a dial (dial = true), or for a
// CONNECT that arrived on shard at from the endpoint from, to attach its
// conn (at is s) or to refuse it (at is nil: its sender is not known, and
// from only decides whether to replace an endpoint made to refuse, see
// remadeLocked). A CONNECT's endpoint is made within the admission budget
// (admit.go) and with at most maxIdlePeers endpoints without conns. t.mu
// is held.
func (s *shard) peerForLocked(addr []byte, dial bool, at *shard, from uintptr) (*peer, error) {
	t := s.t
	heldW(&t.mu, "peerForLocked needs Transport.mu")
	if t.closed {
		return nil, ErrTransportClosed
	}
	if p := s.peers[string(addr)]; p != nil {
		if !p.staleLocked(time.Now()) && !(dial && p.replaceLocked()) && !(!dial && p.remadeLocked(from)) {
			return p, nil
		}
		s.forgetPeerLocked(p)
		go p.closeEP(false)
	}
	if at == nil {
		at, from = s, 0
	}
	if !dial {
		if t.idlePeersLocked() >= maxIdlePeers {
			t.stats.connectsDropped.Add(1)
			return nil, errTooManyPeers
		}
		if err := at.admitLocked(from, addr); err != nil {
			return nil, err
		}
	}
	ua, err := t.kc.ucxAddr(addr)
	if err != nil {
		return nil, err
	}
	w := s.acquire()
	ep, err := w.Connect(ua)
	s.giveBack(w)
	if err != nil {
		return nil, err
	}
	t.markUCXFDs() // the endpoint's sockets
	now := time.Now()
	p := &peer{sh: s, addr: string(addr), ep: ep, conns: make(map[uint64]*Conn), idleSince: now}
	p.lastRecv.Store(now.UnixNano())
	s.peers[p.addr] = p
	s.peersByEP[ep] = p
	if !dial {
		at.madeLocked(p, from)
	}
	return p, nil
}

// noteFromLocked records c's From as the From of p's frames, once c, a
// conn to p, was bound by a frame that only p's worker could send: a
// dial's ACCEPT, which names the conn id its CONNECT sent through p's
// endpoint, or the first frame for an accepted conn, which names the conn
// id its ACCEPT sent there (learnFrom). A CONNECT never sets it: its
// worker address is its sender's word only. A peer that made a new
// endpoint to us since has a new From. t.mu is held.
func (p *peer) noteFromLocked(c *Conn) {
	t := p.sh.t
	heldW(&t.mu, "noteFromLocked needs Transport.mu")
	c.sh.owner.check()
	from := c.from
	s := p.sh
	if from == 0 || s.peers[p.addr] != p {
		return
	}
	p.replace = false // a conn of it was answered
	if p.from.Load() == from {
		return
	}
	s.forgetFromLocked(p)
	p.from.Store(from)
	s.peersByFrom[from] = p
}

// forgetFromLocked removes p from peersByFrom. t.mu is held.
func (s *shard) forgetFromLocked(p *peer) {
	heldW(&s.t.mu, "forgetFromLocked needs Transport.mu")
	if f := p.from.Load(); f != 0 && s.peersByFrom[f] == p {
		delete(s.peersByFrom, f)
	}
}

// Idle endpoints: one that never carried a conn (made to answer a CONNECT
// with REFUSE) is closed after idleRefusedPeer, one whose conns all left
// after idlePeer. One whose conns all left more than idleReuse ago is not
// given a new conn: it is closed, and the conn gets a new endpoint.
const (
	idleRefusedPeer = 2 * time.Second
	idlePeer        = 10 * time.Second
	idleReuse       = idlePeer / 2
)

// staleLocked reports whether p's conns all left more than idleReuse ago
// (at now). The other side's idle sweep may then have closed its endpoint
// between the same two workers: UCX pairs the two endpoints into one
// connection, and closing one end leaves the other sending into nothing,
// without an error (measured over tcp and sm: none within 5 s). Conns
// leave both sides within a round trip, so the other side closes no
// earlier than about idlePeer after this one's idleSince: a peer idle for
// less than idleReuse still has both ends. A dial only passing through
// p (rebound to the peer its ACCEPT names) leaves idleSince as it was;
// an endpoint whose dial got a REFUSE or no answer is replaced on its own
// rule (replaceLocked). t.mu is held.
func (p *peer) staleLocked(now time.Time) bool {
	held(&p.sh.t.mu, "staleLocked needs Transport.mu")
	return len(p.conns) == 0 && p.hadConns && now.Sub(p.idleSince) > idleReuse
}

// remadeLocked reports whether p, an endpoint made only to refuse a
// CONNECT (it never had conns), is to be replaced for a CONNECT from the
// endpoint from: one other than the refused CONNECT's. The dialer
// replaces its endpoint after a REFUSE (peer.replace), and UCX pairs the
// two ends, so p then sends into nothing. t.mu is held.
func (p *peer) remadeLocked(from uintptr) bool {
	held(&p.sh.t.mu, "remadeLocked needs Transport.mu")
	return !p.hadConns && p.refusedFrom != 0 && from != 0 && p.refusedFrom != from
}

// replaceLocked reports whether a dial is to replace p's endpoint: p is
// marked (peer.replace) and carries only dials given up on. t.mu is held.
func (p *peer) replaceLocked() bool {
	held(&p.sh.t.mu, "replaceLocked needs Transport.mu")
	if !p.replace {
		return false
	}
	for _, c := range p.conns {
		c.mu.Lock()
		abandoned := c.state.Phase == PhaseAbandoned
		c.mu.Unlock()
		if !abandoned {
			return false
		}
	}
	return true
}

// markUnanswered marks the peer of c, a dial that got a REFUSE or no
// answer, for replacement (peer.replace) unless one of its conns was
// answered. No conn's mu is held.
func (hs *handshake) markUnanswered() {
	c := hs.c
	t := c.t
	t.mu.Lock()
	defer t.mu.Unlock()
	p := c.peer()
	if p == nil {
		return
	}
	for _, q := range p.conns {
		q.mu.Lock()
		ph := q.state.Phase
		q.mu.Unlock()
		if ph != PhaseDialing && ph != PhaseAbandoned {
			return
		}
	}
	p.replace = true
}

// livenessLocked judges p, a peer with conns, at now (Judge);
// for Probe it returns the conn to carry the PING. After a stall
// of this process (stalled), p's silence counts from StallFloor at
// most. t.mu is held.
func livenessLocked(p *peer, now time.Time, stalled bool) (Verdict, *Conn) {
	held(&p.sh.t.mu, "livenessLocked needs Transport.mu")
	if !p.ka.On() {
		return Alive, nil // keepalives off for all its conns
	}
	if stalled {
		if floor := StallFloor(now, p.ka).UnixNano(); p.lastRecv.Load() < floor {
			p.lastRecv.Store(floor)
		}
	}
	v := Judge(Liveness{KeepAlive: p.ka, Dialer: p.dialed > 0,
		LastRecv: time.Unix(0, p.lastRecv.Load()), LastPing: time.Unix(0, p.lastPing.Load())}, now)
	if v == Alive {
		return v, nil
	}
	c := pingConn(p)
	if c == nil {
		return Alive, nil // only dials waiting for their answer: their own timer decides
	}
	if v == Dead {
		return v, nil
	}
	return v, c
}

// pingConn returns a conn of p with a keepalive whose peer-side id is
// known, to carry a PING; nil if there is none (only dials waiting for
// their answer). t.mu is held.
func pingConn(p *peer) *Conn {
	for _, c := range p.conns {
		if c.keepAlive.On() && c.loadRemoteID() != 0 {
			return c
		}
	}
	return nil
}

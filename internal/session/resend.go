package session

// A CONNECT without an answer is sent again, as TCP resends a SYN, and a
// listener answers a repeated CONNECT with the ACCEPT of the conn the
// first one made (RELIABILITY.md, "Known UCX 1.13 hazards": over UCX's tcp
// a CONNECT through an endpoint made right after the listener closed its
// own can vanish below the session).

import (
	"crypto/sha256"
	"log/slog"
	"time"

	"github.com/ucxnet/ucxnet/internal/stream"
)

// A dial resends its CONNECT connectRTO after sending it, then after
// twice the interval before, up to maxConnectRTO, until it is answered or
// gives up (twice KeepAlive, or its deadline).
const (
	connectRTO    = 200 * time.Millisecond
	maxConnectRTO = 2 * time.Second
)

// dialKey names a dialer's conn as a listener sees it: the worker address
// and the conn id its CONNECT named.
type dialKey struct {
	addr string
	id   uint64
}

// connectOf is what a listener keeps of the CONNECT that made an accepted
// conn, to know it again: its dialKey, a digest of its Hello, the conn
// (nil once the conn left the conn table) and its peer, whether a frame
// of the dialer's bound the conn (its dialer had the ACCEPT), and the
// REFUSE the conn ended with, if any. Under Transport.mu.
type connectOf struct {
	key     dialKey
	sum     [sha256.Size]byte
	c       *Conn
	p       *peer
	bound   bool
	refused stream.RefuseCode
}

// A listener remembers the CONNECT of a conn that left the conn table
// for connectLinger more, if the conn was bound or refused: a repeat of
// it that was on its way then makes no second conn, and a refused one
// gets the same REFUSE. At most maxLingering are remembered so. An
// unbound conn's CONNECT is forgotten with it: its dialer may still be
// waiting for an answer (the ACCEPT, or the path it went by, was lost),
// and its next repeat makes a new conn.
const (
	connectLinger = 10 * time.Second
	maxLingering  = 4096
)

// noteConnect records c, an accepted conn in the conn table, as the one
// that the CONNECT with hello, its payload, made.
func (hs *handshake) noteConnect(hello stream.Hello, payload []byte) {
	c := hs.c
	t := c.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conns[c.id] != c {
		return
	}
	c.hs.connect = &connectOf{key: dialKey{string(hello.WorkerAddr), hello.ConnID}, sum: sha256.Sum256(payload), c: c, p: c.peer()}
	t.accepted[c.hs.connect.key] = c.hs.connect
}

// refuseAccept ends c, an accepted conn not queued yet, and answers its
// dialer's conn dialerID with REFUSE(code), now and for a repeat of its
// CONNECT.
func (hs *handshake) refuseAccept(dialerID uint64, code stream.RefuseCode) {
	c := hs.c
	t := c.t
	t.mu.Lock()
	if c.hs.connect != nil {
		c.hs.connect.refused = code
	}
	t.mu.Unlock()
	t.removeConn(c)
	c.peer().refuse(dialerID, code)
}

// forgetConnectLocked notes that c left the conn table: its CONNECT is
// remembered for connectLinger more if c was bound or refused. t.mu is
// held.
func (hs *handshake) forgetConnectLocked() {
	c := hs.c
	t := c.t
	heldW(&t.mu, "forgetConnectLocked needs Transport.mu")
	k := c.hs.connect
	if k == nil || t.accepted[k.key] != k || k.c == nil {
		return
	}
	k.c = nil
	if !k.bound && k.refused == 0 || t.lingering >= maxLingering {
		delete(t.accepted, k.key)
		return
	}
	t.lingering++
	time.AfterFunc(connectLinger, func() {
		t.mu.Lock()
		t.lingering--
		if t.accepted[k.key] == k {
			delete(t.accepted, k.key)
		}
		t.mu.Unlock()
	})
}

// answerAgain answers a repeated CONNECT for c with c's ACCEPT again, while
// c waits for its dialer's proof or is open: the ACCEPT or what followed
// it may be what was lost. It makes no conn and no endpoint, and the
// ACCEPT goes where the first one went, to the worker address the first
// CONNECT named; the sender of the repeat gets nothing.
func (hs *handshake) answerAgain(name string) {
	c := hs.c
	t := c.t
	c.mu.Lock()
	ph := c.state.Phase
	c.mu.Unlock()
	if ph != PhaseOpen && ph != PhaseAuthPending {
		return
	}
	t.log.event(slog.LevelDebug, "ucxnet: a repeated CONNECT: ACCEPT again", "conn", c.id)
	c.hs.sendAccept(name)
}

// refreshLinger is how long an endpoint replaced by refreshDial stays open
// before it is closed. The listener's endpoint back to this worker may
// share its connection (UCX's tcp pairs them), and a listener that was only
// slow to answer (a dial flood, a loaded machine) is still making conns
// whose ACCEPTs come that way: closing the old endpoint at once lost them
// (1,000 simultaneous dials with two busy loops beside them: 204 made, the
// rest timed out).
const refreshLinger = 5 * time.Second

// resendConnect sends c's CONNECT to the listener name again, the n-th
// time (from 0), if c still waits for its ACCEPT. From the third resend
// on (1.4 s without an answer), an endpoint through which no conn was ever
// answered is replaced first (refreshDial): not sooner, since a listener
// that is only slow to answer (a dial flood on a loaded machine) loses
// ACCEPTs to a dialer that moved its dials meanwhile.
func (hs *handshake) resendConnect(name string, n int) {
	c := hs.c
	c.mu.Lock()
	waiting := c.state.Phase == PhaseDialing && c.remoteID == 0
	c.mu.Unlock()
	if !waiting {
		return
	}
	if n >= 2 {
		c.hs.refreshDial()
	}
	c.t.log.event(slog.LevelDebug, "ucxnet: CONNECT unanswered: sent again", "to", name, "conn", c.id, "time", n+1)
	_ = c.hs.sendConnect(name) // a failed send is a lost one: the next resend or the dial's bound follows
}

// refreshDial moves c, a dial waiting for its ACCEPT, and the other dials
// on its peer to a new endpoint to the same worker, if no conn through its
// endpoint was ever answered (the peer's frames never bound one) and it
// carries only dials: such an endpoint may be one that UCX paired with an
// end the listener had closed, which loses what is sent through it. The
// old endpoint is closed refreshLinger later.
func (hs *handshake) refreshDial() {
	c := hs.c
	t := c.t
	t.mu.Lock()
	defer t.mu.Unlock()
	s := c.sh
	c.mu.Lock()
	old := c.peer()
	c.mu.Unlock()
	if old == nil || old.from.Load() != 0 || s.peers[old.addr] != old || !onlyDialsLocked(old) {
		return
	}
	s.forgetPeerLocked(old)
	p, err := s.peerForLocked([]byte(old.addr), true, nil, 0)
	if err != nil {
		s.peers[old.addr], s.peersByEP[old.ep] = old, old
		return
	}
	for _, q := range old.conns {
		q.mu.Lock()
		t.leavePeerLocked(q)
		q.peerAt.Store(p)
		t.joinPeerLocked(q)
		q.mu.Unlock()
	}
	time.AfterFunc(refreshLinger, func() { old.closeEP(false) })
}

// onlyDialsLocked reports whether p's conns are all dials waiting for
// their answer or given up on. t.mu is held.
func onlyDialsLocked(p *peer) bool {
	held(&p.sh.t.mu, "onlyDialsLocked needs Transport.mu")
	for _, q := range p.conns {
		q.mu.Lock()
		ph := q.state.Phase
		q.mu.Unlock()
		if !q.dialed || ph != PhaseDialing && ph != PhaseAbandoned {
			return false
		}
	}
	return true
}

package session

// The kernel-TCP lane's listening side and its handshake (lane.go says
// when a dial takes this lane; tcpconn.go is the conn side).
//
// A listener that may be dialed over kernel TCP listens on TCP too, only
// where UCX's tcp transport would (Config.NetDevices / UCX_NET_DEVICES),
// and publishes its endpoints in its registry entry (MetaTCP). Each TCP
// connection starts with a preamble (internal/lane listens, accepts, and
// reads and writes the preamble; docs/PROTOCOL.md, "Lanes").
//
// The proofs are the UCX lane's (authState: CPace), over the two ids.
// Before a conn is authenticated it is bounded: tcpHelloTimeout for the
// dialer's first bytes (all an honest dialer sends at once),
// tcpHandshakeTimeout for the whole preamble (the key proof included),
// lane.MaxPreamble bytes, and the lane's bounds on conns in their
// preamble (lane.MaxPending, lane.MaxPendingPerSource; an idle one makes
// room for a newer one); a source that failed guessBurst proofs is
// refused before its challenge is drawn until its bucket refills
// (guessRate a second). Anything else is closed and counted (LaneStats).
// A stranger is told one thing, lane.StatusRefused, for a name not here,
// a key setting not the listener's and a failed proof.

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/ucxnet/ucxnet/internal/auth"
	"github.com/ucxnet/ucxnet/internal/lane"
	"github.com/ucxnet/ucxnet/internal/ucxconf"
	"github.com/ucxnet/ucxnet/registry"
)

// The bounds on a TCP conn's preamble, both sides (variables for tests):
// the dialer's hello, and the whole preamble.
var (
	tcpHelloTimeout     = 2 * time.Second
	tcpHandshakeTimeout = 5 * time.Second
)

// The failed key proofs a source may make on a listener's TCP side: a
// burst, then so many a second.
const (
	guessBurst      = 10
	guessRate       = 1
	maxGuessSources = 1024 // sources tracked; more share one bucket
)

// tcpSide is what a listener's TCP conns share: the preamble's bounds and
// the failed proofs per source.
type tcpSide struct {
	hello, whole time.Duration
	mu           sync.Mutex
	guesses      map[netip.Prefix]*Bucket
}

// mayGuess reports whether src has a failed proof left.
func (ts *tcpSide) mayGuess(src netip.Prefix, now time.Time) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	b, ok := ts.guesses[src]
	if !ok {
		b, ok = ts.guesses[netip.Prefix{}] // the shared bucket, if src is counted there
	}
	return !ok || b.Tokens(now, guessBurst, guessRate) >= 1
}

// guessed takes a failed proof of src's.
func (ts *tcpSide) guessed(src netip.Prefix, now time.Time) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	b, ok := ts.guesses[src]
	if !ok {
		if len(ts.guesses) >= maxGuessSources {
			for k, v := range ts.guesses { // forget the sources refilled
				if v.Tokens(now, guessBurst, guessRate) >= guessBurst {
					delete(ts.guesses, k)
				}
			}
		}
		if len(ts.guesses) >= maxGuessSources {
			src = netip.Prefix{} // the shared bucket
		}
		if b, ok = ts.guesses[src]; !ok {
			b = &Bucket{}
			ts.guesses[src] = b
		}
	}
	b.Take(now, guessBurst, guessRate)
}

// openTCPLane starts l's TCP side if the lane is possible here; nil when
// it is not (forced to UCX, UCX_TLS without tcp, no address to listen
// on).
func (l *Listener) openTCPLane() (*lane.Listener, error) {
	t := l.t
	forced, _ := t.policy.forced()
	if forced == LaneUCX || forced == "" && t.policy.haveUCX() && !ucxconf.TCPEnabled(t.policy.tls()) {
		return nil, nil
	}
	if forced == "" && !t.ucx.IsUCX(t.eng) && t.policy.haveUCX() {
		return nil, nil // the in-memory engine of tests: its conns stay on it unless forced
	}
	ts := &tcpSide{hello: tcpHelloTimeout, whole: tcpHandshakeTimeout, guesses: map[netip.Prefix]*Bucket{}}
	devices, _ := t.LaneDevices() // exposure.go
	return lane.Listen(devices, func(tl *lane.Listener, tc *net.TCPConn) { l.serveTCP(tl, tc, ts) }, func() { t.lanes.OverCap.Add(1) })
}

// netDevices is the UCX_NET_DEVICES in force ("" when unset).
func (r *lanePolicy) netDevices() string {
	if v, ok := r.cfg.UCX["NET_DEVICES"]; ok {
		return v
	}
	return os.Getenv("UCX_NET_DEVICES")
}

// reserveTCP holds a backlog place for a conn about to be told OK; false
// if the backlog is full or the listener closed.
func (l *Listener) reserveTCP(tl *lane.Listener) bool {
	return tl.Reserve(func(reserved int) bool { return l.isClosed() || len(l.queue)+reserved >= cap(l.queue) })
}

// serveTCP runs a TCP conn's preamble and hands the conn to Accept.
func (l *Listener) serveTCP(tl *lane.Listener, tc *net.TCPConn, ts *tcpSide) {
	c, err := l.handshakeTCP(tl, tc, ts)
	tl.Done(tc)
	if err == errRefusedTCP {
		_ = tc.Close() // after the status byte: FIN, so that it is read
		return
	}
	if err != nil {
		lane.Reset(tc)
		return
	}
	t := l.t
	lane.SetKeepAlive(tc, l.ka)
	ok := t.lanes.add(c) && l.enqueue(c)
	tl.Unreserve()
	if !ok {
		t.lanes.remove(c)
		t.stats.refused.Add(1)
		lane.Reset(tc)
		return
	}
	t.stats.accepts.Add(1)
}

// handshakeTCP runs the listener's side of tc's preamble, within ts's
// bounds.
func (l *Listener) handshakeTCP(tl *lane.Listener, tc *net.TCPConn, ts *tcpSide) (_ *LaneConn, err error) {
	t := l.t
	start := time.Now()
	_ = tc.SetDeadline(start.Add(min(ts.hello, ts.whole)))
	h, err := lane.ReadHello(tc)
	tl.PeerTurn(tc, false)
	if err != nil {
		if !tl.Evicted(tc) {
			t.lanes.CountPreambleErr(err)
		}
		return nil, err
	}
	id := lane.NewID()
	src := lane.SourceOf(tc)
	refuse := func(why string) error {
		t.stats.refused.Add(1)
		t.log.hostile("ucxnet: refused a kernel-tcp connect", "reason", why, "from", tc.RemoteAddr().String())
		_, _ = tc.Write(lane.AppendReply(nil, lane.Reply{Status: lane.StatusRefused, ID: id}, nil))
		return errRefusedTCP
	}
	switch {
	case h.Name != l.addr.Name:
		return nil, refuse("no listener of that name here")
	case l.psk != nil && !h.PSK, l.psk == nil && h.PSK:
		t.log.authFailed()
		return nil, refuse("the dialer's pre-shared key setting is not the listener's")
	case l.psk != nil && !ts.mayGuess(src, start):
		t.log.authFailed()
		return nil, refuse("too many failed key proofs from this source")
	}
	if !l.reserveTCP(tl) {
		t.stats.refused.Add(1)
		_, _ = tc.Write(lane.AppendReply(nil, lane.Reply{Status: lane.StatusBacklogFull, PSK: l.psk != nil, ID: id}, nil))
		return nil, errRefusedTCP
	}
	defer func() {
		if err != nil {
			tl.Unreserve()
		}
	}()
	c := newLaneConn(t, tc, Addr{Name: l.addr.Name, ID: id}, Addr{Name: h.LocalName, ID: h.ID}, reasonAcceptedTCP)
	c.id = id
	c.remoteID = h.ID
	if l.psk == nil {
		if _, err := tc.Write(lane.AppendReply(nil, lane.Reply{Status: lane.StatusOK, ID: id}, nil)); err != nil {
			return nil, err
		}
		_ = tc.SetDeadline(time.Time{})
		return c, nil
	}
	_ = tc.SetDeadline(start.Add(ts.whole))
	if err := l.keyProofTCP(tl, tc, ts, h, id, src); err != nil {
		return nil, err
	}
	_ = tc.SetDeadline(time.Time{})
	return c, nil
}

// keyProofTCP runs the key proof of a keyed listener's TCP conn: its
// challenge out, the dialer's proof in, its own proof out.
func (l *Listener) keyProofTCP(tl *lane.Listener, tc *net.TCPConn, ts *tcpSide, h lane.Hello, id uint64, src netip.Prefix) error {
	t := l.t
	a := newListenAuth(l.psk, l.addr.Name, h.Challenge, l)
	if _, err := tc.Write(lane.AppendReply(nil, lane.Reply{Status: lane.StatusOK, PSK: true, ID: id}, a.challenge())); err != nil {
		return err
	}
	tl.PeerTurn(tc, true)
	mac := make([]byte, auth.MACLen)
	_, err := io.ReadFull(tc, mac)
	tl.PeerTurn(tc, false)
	if err != nil {
		if !tl.Evicted(tc) {
			t.log.authFailed()
			t.lanes.CountPreambleErr(err)
		}
		return err
	}
	if !a.hs.Verify(auth.Dialer, mac, h.ID, id) {
		t.log.authFailed()
		ts.guessed(src, time.Now())
		_, _ = tc.Write([]byte{lane.StatusRefused})
		return errRefusedTCP
	}
	proof, err := a.hs.Proof(auth.Listener, h.ID, id)
	if err != nil {
		return err
	}
	_, err = tc.Write(append([]byte{lane.StatusOK}, proof...))
	return err
}

// errRefusedTCP: the listener refused the preamble (and said so).
var errRefusedTCP = errors.New("refused")

// startTCPLane opens l's TCP side when the lane is possible and returns
// meta with its endpoints added (a copy; meta is the application's).
func (l *Listener) startTCPLane(meta map[string]string) (map[string]string, error) {
	tl, err := l.openTCPLane()
	if err != nil || tl == nil {
		return meta, err
	}
	v := lane.FormatEndpoints(tl.Endpoints())
	if v == "" {
		tl.Close()
		return meta, nil
	}
	l.tcp = tl
	out := make(map[string]string, len(meta)+1)
	for k, x := range meta {
		out[k] = x
	}
	out[MetaTCP] = v
	size := 0
	for k, x := range out {
		size += len(k) + len(x)
	}
	if size > registry.MaxMetaBytes || len(out) > registry.MaxMetaKeys {
		// No room next to the application's meta: UCX only, as before.
		l.tcp = nil
		tl.Close()
		return meta, nil
	}
	return out, nil
}

// stopTCPLane closes l's TCP side, if any.
func (l *Listener) stopTCPLane() {
	if l.tcp != nil {
		l.tcp.Close()
	}
}

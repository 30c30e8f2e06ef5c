package ucxnet

// The kernel-TCP lane's listening side and its handshake (lane.go says
// when a dial takes this lane; tcpconn.go is the conn side).
//
// A listener that may be dialed over kernel TCP listens on TCP too, only
// where UCX's tcp transport would (Config.NetDevices / UCX_NET_DEVICES),
// and publishes its endpoints in its registry entry (MetaTCP). Each TCP
// connection starts with a preamble (internal/lane reads and writes it;
// docs/PROTOCOL.md, "Lanes").
//
// The proofs are the UCX lane's (authState: CPace), over the two ids.
// Before a conn is authenticated it is bounded: tcpHandshakeTimeout for
// the whole preamble, lane.MaxPreamble bytes, maxPendingTCP such conns per
// listener; anything else is closed and counted (LaneStats).

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

// maxPendingTCP bounds a listener's TCP conns whose preamble is not done;
// more are closed at once.
const maxPendingTCP = 64

// tcpHandshakeTimeout bounds a TCP conn's whole preamble, both sides (a
// variable for tests).
var tcpHandshakeTimeout = 5 * time.Second

// tcpListener is a Listener's kernel-TCP side.
type tcpListener struct {
	l         *Listener
	lns       []*net.TCPListener
	endpoints []netip.AddrPort
	timeout   time.Duration
	wg        sync.WaitGroup
	mu        sync.Mutex
	pending   map[*net.TCPConn]struct{} // conns in their preamble
	// reserved counts backlog places held for conns told OK but not yet
	// queued: the dialer's dial returns at the OK.
	reserved int
	closed   bool
}

// openTCPLane starts l's TCP side if the lane is possible here; nil when
// it is not (forced to UCX, UCX_TLS without tcp, no address to listen
// on).
func (l *Listener) openTCPLane() (*tcpListener, error) {
	t := l.t
	forced, _ := t.forcedLane()
	if forced == LaneUCX || forced == "" && t.haveUCX() && !ucxconf.TCPEnabled(t.tlsValue()) {
		return nil, nil
	}
	if forced == "" && !isUCX(t.eng) && t.haveUCX() {
		return nil, nil // the in-memory engine of tests: its conns stay on it unless forced
	}
	addrs, err := lane.ListenAddrs(t.netDevices())
	if err != nil || len(addrs) == 0 {
		return nil, err
	}
	tl := &tcpListener{l: l, timeout: tcpHandshakeTimeout, pending: map[*net.TCPConn]struct{}{}}
	port := "0"
	for _, a := range addrs {
		ln, err := net.Listen("tcp", net.JoinHostPort(a.Bind, port))
		if err != nil && port != "0" {
			ln, err = net.Listen("tcp", net.JoinHostPort(a.Bind, "0"))
		}
		if err != nil {
			tl.close()
			return nil, err
		}
		tln := ln.(*net.TCPListener)
		tl.lns = append(tl.lns, tln)
		ap := tln.Addr().(*net.TCPAddr).AddrPort()
		_, port, _ = net.SplitHostPort(tln.Addr().String())
		for _, p := range a.Publish {
			tl.endpoints = append(tl.endpoints, netip.AddrPortFrom(p, ap.Port()))
		}
	}
	lane.SortEndpoints(tl.endpoints)
	for _, ln := range tl.lns {
		tl.wg.Add(1)
		go tl.acceptLoop(ln)
	}
	return tl, nil
}

// netDevices is the UCX_NET_DEVICES in force ("" when unset).
func (t *Transport) netDevices() string {
	if v, ok := t.cfg.UCX["NET_DEVICES"]; ok {
		return v
	}
	return os.Getenv("UCX_NET_DEVICES")
}

// close stops accepting, closes the conns still in their preamble and
// waits for the accept loops and handshakes to end.
func (tl *tcpListener) close() {
	tl.mu.Lock()
	tl.closed = true
	for tc := range tl.pending {
		tc.Close()
	}
	tl.mu.Unlock()
	for _, ln := range tl.lns {
		ln.Close()
	}
	tl.wg.Wait()
}

// acceptLoop accepts TCP conns and starts their handshakes.
func (tl *tcpListener) acceptLoop(ln *net.TCPListener) {
	defer tl.wg.Done()
	var backoff time.Duration
	for {
		tc, err := ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || tl.isClosed() {
				return
			}
			// EMFILE and the like: wait, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		if !tl.admit(tc) {
			tl.l.t.lanes.overCap.Add(1)
			lane.Reset(tc)
			continue
		}
		tl.wg.Add(1)
		go tl.serve(tc)
	}
}

func (tl *tcpListener) isClosed() bool {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.closed
}

// admit records a conn in its preamble; false if the listener is closed
// or maxPendingTCP are already there.
func (tl *tcpListener) admit(tc *net.TCPConn) bool {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.closed || len(tl.pending) >= maxPendingTCP {
		return false
	}
	tl.pending[tc] = struct{}{}
	return true
}

// reserve holds a backlog place for a conn about to be told OK; false if
// the backlog is full or the listener closed.
func (tl *tcpListener) reserve() bool {
	l := tl.l
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.closed || l.isClosed() || len(l.queue)+tl.reserved >= cap(l.queue) {
		return false
	}
	tl.reserved++
	return true
}

// unreserve gives back a place reserve held.
func (tl *tcpListener) unreserve() {
	tl.mu.Lock()
	tl.reserved--
	tl.mu.Unlock()
}

// done forgets a conn whose preamble ended.
func (tl *tcpListener) done(tc *net.TCPConn) {
	tl.mu.Lock()
	delete(tl.pending, tc)
	tl.mu.Unlock()
}

// serve runs a TCP conn's preamble and hands the conn to Accept.
func (tl *tcpListener) serve(tc *net.TCPConn) {
	defer tl.wg.Done()
	c, err := tl.handshake(tc)
	tl.done(tc)
	if err == errRefusedTCP {
		_ = tc.Close() // after the status byte: FIN, so that it is read
		return
	}
	if err != nil {
		lane.Reset(tc)
		return
	}
	t := tl.l.t
	lane.SetKeepAlive(tc, tl.l.ka)
	ok := t.lanes.add(c) && tl.l.enqueue(c)
	tl.unreserve()
	if !ok {
		t.lanes.remove(c)
		t.stats.refused.Add(1)
		lane.Reset(tc)
		return
	}
	t.stats.accepts.Add(1)
}

// handshake runs the listener's side of tc's preamble, within tl.timeout.
func (tl *tcpListener) handshake(tc *net.TCPConn) (_ *Conn, err error) {
	t, l := tl.l.t, tl.l
	_ = tc.SetDeadline(time.Now().Add(tl.timeout))
	h, err := lane.ReadHello(tc)
	if err != nil {
		t.lanes.countPreambleErr(err)
		return nil, err
	}
	id := t.lanes.newID()
	refuse := func(status byte) error {
		t.stats.refused.Add(1)
		t.logHostile("ucxnet: refused a kernel-tcp connect", "reason", tcpStatusErr(status, l.addr.Name).Error(), "from", tc.RemoteAddr().String())
		_, _ = tc.Write(lane.AppendReply(nil, lane.Reply{Status: status, PSK: l.psk != nil, ID: id}, nil))
		return errRefusedTCP
	}
	if h.Name != l.addr.Name {
		return nil, refuse(lane.StatusNoListener)
	}
	if l.psk != nil && !h.PSK {
		t.authFailed()
		return nil, refuse(lane.StatusNeedPSK)
	}
	if l.psk == nil && h.PSK {
		t.authFailed()
		return nil, refuse(lane.StatusNoPSK)
	}
	if !tl.reserve() {
		return nil, refuse(lane.StatusBacklogFull)
	}
	defer func() {
		if err != nil {
			tl.unreserve()
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
	a := newListenAuth(l.psk, l.addr.Name, h.Challenge, l)
	if _, err := tc.Write(lane.AppendReply(nil, lane.Reply{Status: lane.StatusOK, PSK: true, ID: id}, a.challenge())); err != nil {
		return nil, err
	}
	mac := make([]byte, auth.MACLen)
	if _, err := io.ReadFull(tc, mac); err != nil {
		t.authFailed()
		t.lanes.countPreambleErr(err)
		return nil, err
	}
	if !a.hs.Verify(auth.Dialer, mac, h.ID, id) {
		t.authFailed()
		_, _ = tc.Write([]byte{lane.StatusAuthFailed})
		return nil, errRefusedTCP
	}
	proof, err := a.hs.Proof(auth.Listener, h.ID, id)
	if err != nil {
		return nil, err
	}
	if _, err := tc.Write(append([]byte{lane.StatusOK}, proof...)); err != nil {
		return nil, err
	}
	_ = tc.SetDeadline(time.Time{})
	return c, nil
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
	v := lane.FormatEndpoints(tl.endpoints)
	if v == "" {
		tl.close()
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
		tl.close()
		return meta, nil
	}
	return out, nil
}

// stopTCPLane closes l's TCP side, if any.
func (l *Listener) stopTCPLane() {
	if l.tcp != nil {
		l.tcp.close()
	}
}

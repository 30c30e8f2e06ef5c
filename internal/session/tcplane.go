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
// Before a conn is authenticated it is bounded: tcpHandshakeTimeout for
// the whole preamble, lane.MaxPreamble bytes, lane.MaxPending such conns per
// listener; anything else is closed and counted (LaneStats).

import (
	"errors"
	"io"
	"net"
	"os"
	"time"

	"github.com/ucxnet/ucxnet/internal/auth"
	"github.com/ucxnet/ucxnet/internal/lane"
	"github.com/ucxnet/ucxnet/internal/ucxconf"
	"github.com/ucxnet/ucxnet/registry"
)

// tcpHandshakeTimeout bounds a TCP conn's whole preamble, both sides (a
// variable for tests).
var tcpHandshakeTimeout = 5 * time.Second

// openTCPLane starts l's TCP side if the lane is possible here; nil when
// it is not (forced to UCX, UCX_TLS without tcp, no address to listen
// on).
func (l *Listener) openTCPLane() (*lane.Listener, error) {
	t := l.t
	forced, _ := t.forcedLane()
	if forced == LaneUCX || forced == "" && t.haveUCX() && !ucxconf.TCPEnabled(t.tlsValue()) {
		return nil, nil
	}
	if forced == "" && !isUCX(t.eng) && t.haveUCX() {
		return nil, nil // the in-memory engine of tests: its conns stay on it unless forced
	}
	timeout := tcpHandshakeTimeout
	devices, _ := t.LaneDevices() // exposure.go
	return lane.Listen(devices, func(tl *lane.Listener, tc *net.TCPConn) { l.serveTCP(tl, tc, timeout) }, func() { t.lanes.OverCap.Add(1) })
}

// netDevices is the UCX_NET_DEVICES in force ("" when unset).
func (t *Transport) netDevices() string {
	if v, ok := t.cfg.UCX["NET_DEVICES"]; ok {
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
func (l *Listener) serveTCP(tl *lane.Listener, tc *net.TCPConn, timeout time.Duration) {
	c, err := l.handshakeTCP(tl, tc, timeout)
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

// handshakeTCP runs the listener's side of tc's preamble, within timeout.
func (l *Listener) handshakeTCP(tl *lane.Listener, tc *net.TCPConn, timeout time.Duration) (_ *Conn, err error) {
	t := l.t
	_ = tc.SetDeadline(time.Now().Add(timeout))
	h, err := lane.ReadHello(tc)
	if err != nil {
		t.lanes.CountPreambleErr(err)
		return nil, err
	}
	id := lane.NewID()
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
	if !l.reserveTCP(tl) {
		return nil, refuse(lane.StatusBacklogFull)
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
	a := newListenAuth(l.psk, l.addr.Name, h.Challenge, l)
	if _, err := tc.Write(lane.AppendReply(nil, lane.Reply{Status: lane.StatusOK, PSK: true, ID: id}, a.challenge())); err != nil {
		return nil, err
	}
	mac := make([]byte, auth.MACLen)
	if _, err := io.ReadFull(tc, mac); err != nil {
		t.authFailed()
		t.lanes.CountPreambleErr(err)
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

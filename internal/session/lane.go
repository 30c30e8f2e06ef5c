package session

// Lanes: which way a conn goes (internal/lane decides, and says why).
// A dialed conn on the kernel TCP lane is a plain *net.TCPConn
// (tcpconn.go, tcplane.go).

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/lane"
	"github.com/ucxnet/ucxnet/internal/ucxconf"
	"github.com/ucxnet/ucxnet/registry"
)

// The lanes, as Config.Lane and $UCXNET_LANE name them.
const (
	LaneAuto = "auto" // ucxnet picks per peer (the default)
	LaneUCX  = "ucx"  // UCX active messages
	LaneTCP  = "tcp"  // a kernel TCP connection (Go's net)
)

// EnvLane names the environment variable that forces a lane when
// Config.Lane is empty: "ucx", "tcp" or "auto".
const EnvLane = "UCXNET_LANE"

// MetaTCP is the registry meta key under which a listener publishes its
// kernel-TCP endpoints: "ip:port" literals separated by commas. It replaces
// a value the application set.
const MetaTCP = "tcp"

// The reasons an accepted conn gives for its lane (Conn.Lane).
const (
	reasonAcceptedUCX = "accepted over UCX"
	reasonAcceptedTCP = "accepted over kernel tcp"
)

// laneRefused is the error of a dial that no lane takes to its peer
// (ch.Lane is ""), nil otherwise.
func laneRefused(ch lane.Choice) error {
	if ch.Lane != "" {
		return nil
	}
	return withDetail(ErrRefused, "%s", ch.Reason)
}

// checkLane validates a Config.Lane or $UCXNET_LANE value.
func checkLane(v string) error {
	switch v {
	case "", LaneAuto, LaneUCX, LaneTCP:
		return nil
	}
	return fmt.Errorf("ucxnet: unknown lane %q (want %q, %q or %q)", v, LaneAuto, LaneUCX, LaneTCP)
}

// lanePolicy decides a transport's lanes from its configuration, the
// engine it runs and the UCX it is bound to. Set when the transport
// starts, then read-only.
type lanePolicy struct {
	cfg Config
	eng engine.Engine // shard 0's: the worker listeners publish
	ucx UCXBinding
	lib UCXLibrary
	reg registry.Registry
}

// forced returns the lane the configuration forces ("" for auto) and
// the reason it gives.
func (r *lanePolicy) forced() (name, why string) {
	if v := r.cfg.Lane; v != "" {
		if v == LaneAuto {
			return "", ""
		}
		return v, lane.ReasonForcedConfig
	}
	if v := os.Getenv(EnvLane); v == LaneUCX || v == LaneTCP {
		return v, lane.ReasonForcedEnv
	}
	return "", ""
}

// ucxTLSSet reports whether the user chose UCX's transports.
func (r *lanePolicy) ucxTLSSet() bool {
	_, set := ucxconf.EffectiveTLS(r.cfg.UCX)
	return set
}

// tls is the UCX_TLS in force ("" when unset).
func (r *lanePolicy) tls() string {
	v, _ := ucxconf.EffectiveTLS(r.cfg.UCX)
	return v
}

// haveUCX reports whether this transport runs UCX.
func (r *lanePolicy) haveUCX() bool {
	_, none := r.eng.(noUCX)
	return r.eng != nil && !none
}

// decide gathers the facts about entry e and decides the lane to it; the
// endpoints are the TCP endpoints to try, in order.
func (r *lanePolicy) decide(e registry.Entry) (lane.Choice, []netip.AddrPort) {
	_, _, host := registry.CurrentProcess()
	f := lane.Facts{UCXTLS: r.ucxTLSSet(), HaveUCX: r.haveUCX(), SameHost: e.Host != "" && e.Host == host}
	f.Forced, f.ForcedBy = r.forced()
	eps := lane.ParseEndpoints(e.Meta[MetaTCP], f.SameHost)
	f.PeerTCP = len(eps) > 0
	if o, err := r.ucx.Offer(e.Address); err == nil {
		f.PeerUCX, f.Peer = true, lane.Offer{SharedMemory: o.SharedMemory, RDMA: o.RDMA}
	}
	if f.HaveUCX {
		o, _ := r.ucx.Offer(r.eng.Address())
		f.Local = lane.Offer{SharedMemory: o.SharedMemory, RDMA: o.RDMA}
	}
	return lane.Decide(f), eps
}

// LaneInfo says which lane a dial to a name would take, and why. Its
// fields mean what ucxnet.LaneInfo's do: ucxnet converts one to the other,
// so the two have the same fields in the same order.
type LaneInfo struct {
	Lane      string   `json:"lane"`
	Reason    string   `json:"reason"`
	Endpoints []string `json:"endpoints"`
}

// LaneTo returns the lane a dial to name would take, and why.
func (t *Transport) LaneTo(name string) (LaneInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultDialTimeout)
	defer cancel()
	e, err := t.resolve(ctx, name)
	if err != nil {
		return LaneInfo{}, err
	}
	ch, eps := t.policy.decide(e)
	info := LaneInfo{Lane: ch.Lane, Reason: ch.Reason}
	if err := laneRefused(ch); err != nil {
		info.Reason = err.Error()
	}
	for _, ap := range eps {
		info.Endpoints = append(info.Endpoints, ap.String())
	}
	return info, nil
}

// LaneDevices returns where the transport's listeners listen on the
// kernel-TCP lane, in UCX_NET_DEVICES's syntax ("" for every interface),
// and why: the devices UCX_NET_DEVICES names when it is set; else, with a
// registry that only this host reads (a directory, the in-process memory
// registry), the loopback interface; else (a registry server, etcd)
// every interface, as UCX's tcp transport listens.
func (t *Transport) LaneDevices() (devices, why string) {
	if d := t.policy.netDevices(); d != "" {
		return d, exposureSet
	}
	switch t.reg.(type) {
	case *registry.Dir, *registry.Memory:
		return loopbackDevices(), fmt.Sprintf(exposureLocal, t.reg)
	}
	return "", fmt.Sprintf(exposureShared, t.reg)
}

// dialTCP dials entry e over the TCP lane: the endpoints in order, then
// the preamble.
func (t *Transport) dialTCP(ctx context.Context, e registry.Entry, eps []netip.AddrPort, psk []byte, raddr Addr, why string, ka time.Duration) (*LaneConn, error) {
	tc, err := lane.DialEndpoints(ctx, eps)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, laneDownf("%q over kernel tcp: %v", e.Name, err)
	}
	id := lane.NewID()
	c := newLaneConn(t, tc, Addr{Name: t.name, ID: id}, raddr, why)
	c.id, c.dialed = id, true
	dl := time.Now().Add(tcpHandshakeTimeout)
	if cdl, ok := ctx.Deadline(); ok && cdl.Before(dl) {
		dl = cdl
	}
	_ = tc.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = tc.SetDeadline(time.Unix(1, 0)) })
	err = c.dialPreamble(e.Name, psk)
	if !stop() || ctx.Err() != nil {
		err = ctx.Err()
	}
	if err == nil && !t.lanes.add(c) {
		err = ErrTransportClosed
	}
	if err != nil {
		lane.Reset(tc)
		return nil, err
	}
	_ = tc.SetDeadline(time.Time{})
	lane.SetKeepAlive(tc, ka)
	return c, nil
}

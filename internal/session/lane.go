package session

// Lanes: which way a conn goes (internal/lane decides, and says why).
// A dialed conn on the kernel TCP lane is a plain *net.TCPConn
// (tcpconn.go, tcplane.go).

import (
	"context"
	"fmt"
	"net/netip"
	"os"

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

// forcedLane returns the lane the configuration forces ("" for auto) and
// the reason it gives.
func (t *Transport) forcedLane() (name, why string) {
	if v := t.cfg.Lane; v != "" {
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
func (t *Transport) ucxTLSSet() bool {
	_, set := ucxconf.EffectiveTLS(t.cfg.UCX)
	return set
}

// tlsValue is the UCX_TLS in force ("" when unset).
func (t *Transport) tlsValue() string {
	v, _ := ucxconf.EffectiveTLS(t.cfg.UCX)
	return v
}

// haveUCX reports whether this transport runs UCX.
func (t *Transport) haveUCX() bool {
	_, none := t.eng.(noUCX)
	return t.eng != nil && !none
}

// laneFor gathers the facts about entry e and decides the lane to it; the
// endpoints are the TCP endpoints to try, in order.
func (t *Transport) laneFor(e registry.Entry) (lane.Choice, []netip.AddrPort) {
	_, _, host := registry.CurrentProcess()
	f := lane.Facts{UCXTLS: t.ucxTLSSet(), HaveUCX: t.haveUCX(), SameHost: e.Host != "" && e.Host == host}
	f.Forced, f.ForcedBy = t.forcedLane()
	eps := lane.ParseEndpoints(e.Meta[MetaTCP], f.SameHost)
	f.PeerTCP = len(eps) > 0
	if o, err := offerOf(e.Address); err == nil {
		f.PeerUCX, f.Peer = true, lane.Offer{SharedMemory: o.SharedMemory, RDMA: o.RDMA}
	}
	if f.HaveUCX {
		o, _ := offerOf(t.eng.Address())
		f.Local = lane.Offer{SharedMemory: o.SharedMemory, RDMA: o.RDMA}
	}
	return lane.Decide(f), eps
}

// Lane returns the lane the conn runs on — "ucx" or "tcp" (a kernel TCP
// connection) — and why it was chosen, e.g. "kernel tcp: no UCX transport
// better than tcp to this peer" or "same host: shared memory".
func (c *Conn) Lane() (name, reason string) {
	if c.lane != nil {
		return LaneTCP, c.laneWhy
	}
	if c.laneWhy == "" {
		return LaneUCX, reasonAcceptedUCX
	}
	return LaneUCX, c.laneWhy
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
	ch, eps := t.laneFor(e)
	info := LaneInfo{Lane: ch.Lane, Reason: ch.Reason}
	if err := laneRefused(ch); err != nil {
		info.Reason = err.Error()
	}
	for _, ap := range eps {
		info.Endpoints = append(info.Endpoints, ap.String())
	}
	return info, nil
}

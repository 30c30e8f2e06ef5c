package ucxnet

// Lanes: which way a conn goes. A dial takes the UCX lane (active messages
// over the UCX worker) where UCX has something better than its own tcp
// transport to the peer — shared memory on one host, RDMA between hosts —
// and the kernel TCP lane (a plain *net.TCPConn, tcplane.go) where UCX
// would only have tcp: there Go's TCP makes no user-space copy and gives
// each conn its own socket. decideLane makes the choice from what the
// dialer knows before it connects (the registry entry, its own worker
// address, the configuration) and says why, in the spirit of SMC-R's
// fallback reasons (smcss).

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

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

// maxTCPEndpoints bounds the endpoints a listener publishes and a dialer
// reads from an entry; maxMetaTCPLen bounds MetaTCP's value.
const (
	maxTCPEndpoints = 16
	maxMetaTCPLen   = 1024
)

// The reasons a lane was chosen (Conn.Lane, ucxnet info).
const (
	reasonForcedConfig = "forced by config (Config.Lane)"
	reasonForcedEnv    = "forced by " + EnvLane
	reasonUCXTLS       = "UCX_TLS set: the user asked for UCX transports"
	reasonNoTCPPeer    = "peer publishes no TCP endpoint"
	reasonNoUCXHere    = "kernel tcp: this process has no UCX"
	reasonNoUCXPeer    = "kernel tcp: peer has no UCX"
	reasonSharedMemory = "same host: shared memory"
	reasonRDMA         = "RDMA to this peer"
	reasonOnlyTCP      = "kernel tcp: no UCX transport better than tcp to this peer"
	reasonAcceptedUCX  = "accepted over UCX"
	reasonAcceptedTCP  = "accepted over kernel tcp"
)

// laneFacts are the inputs of the lane decision.
type laneFacts struct {
	forced   string // LaneUCX, LaneTCP or "" (auto)
	forcedBy string // the reason a forced lane gives
	ucxTLS   bool   // UCX_TLS is set (environment or Config.UCX)
	haveUCX  bool   // this process runs UCX
	peerTCP  bool   // the entry publishes a usable TCP endpoint
	peerUCX  bool   // the entry's address is a UCX worker address this build reads
	sameHost bool   // the entry's Host is ours
	local    addressOffer
	peer     addressOffer
}

// laneChoice is a lane decision: the lane and why, or why neither works.
type laneChoice struct {
	lane   string // LaneUCX or LaneTCP
	reason string
	err    error // neither lane reaches the peer (wraps ErrRefused)
}

// decideLane picks the lane for a dial. It is pure: every input is in f.
func decideLane(f laneFacts) laneChoice {
	ucx := func(why string) laneChoice { return laneChoice{lane: LaneUCX, reason: why} }
	tcp := func(why string) laneChoice { return laneChoice{lane: LaneTCP, reason: why} }
	fail := func(format string, a ...any) laneChoice { return laneChoice{err: withDetail(ErrRefused, format, a...)} }
	switch f.forced {
	case LaneTCP:
		if !f.peerTCP {
			return fail("lane %s (%s), but the peer publishes no TCP endpoint", LaneTCP, f.forcedBy)
		}
		return tcp(f.forcedBy)
	case LaneUCX:
		if !f.haveUCX {
			return fail("lane %s (%s), but this process has no UCX", LaneUCX, f.forcedBy)
		}
		if !f.peerUCX {
			return fail("lane %s (%s), but the peer has no UCX", LaneUCX, f.forcedBy)
		}
		return ucx(f.forcedBy)
	}
	switch {
	case !f.peerTCP && f.haveUCX:
		return ucx(reasonNoTCPPeer)
	case !f.peerTCP:
		return fail("the peer publishes no TCP endpoint and this process has no UCX")
	case !f.haveUCX:
		return tcp(reasonNoUCXHere)
	case !f.peerUCX:
		return tcp(reasonNoUCXPeer)
	case f.ucxTLS:
		return ucx(reasonUCXTLS)
	case f.sameHost && f.local.SharedMemory && f.peer.SharedMemory:
		return ucx(reasonSharedMemory)
	case f.local.RDMA && f.peer.RDMA:
		return ucx(reasonRDMA)
	}
	return tcp(reasonOnlyTCP)
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
func (t *Transport) forcedLane() (lane, why string) {
	if v := t.cfg.Lane; v != "" {
		if v == LaneAuto {
			return "", ""
		}
		return v, reasonForcedConfig
	}
	if v := os.Getenv(EnvLane); v == LaneUCX || v == LaneTCP {
		return v, reasonForcedEnv
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
func (t *Transport) laneFor(e registry.Entry) (laneChoice, []netip.AddrPort) {
	_, _, host := registry.CurrentProcess()
	f := laneFacts{ucxTLS: t.ucxTLSSet(), haveUCX: t.haveUCX(), sameHost: e.Host != "" && e.Host == host}
	f.forced, f.forcedBy = t.forcedLane()
	eps := parseTCPEndpoints(e.Meta[MetaTCP], f.sameHost)
	f.peerTCP = len(eps) > 0
	if o, err := offerOf(e.Address); err == nil {
		f.peerUCX, f.peer = true, o
	}
	if f.haveUCX {
		f.local, _ = offerOf(t.eng.Address())
	}
	return decideLane(f), eps
}

// parseTCPEndpoints reads a MetaTCP value: at most maxTCPEndpoints
// "ip:port" literals (no names: nothing is looked up), port not 0, no
// multicast or unspecified address. Loopback endpoints are kept only for
// an entry of this host (another host's loopback is ours), and come
// first then. Anything else is skipped.
func parseTCPEndpoints(v string, sameHost bool) []netip.AddrPort {
	if v == "" || len(v) > maxMetaTCPLen {
		return nil
	}
	var eps, loop []netip.AddrPort
	for i, s := range strings.Split(v, ",") {
		if i >= maxTCPEndpoints {
			break
		}
		ap, err := netip.ParseAddrPort(strings.TrimSpace(s))
		if err != nil || ap.Port() == 0 || !ap.Addr().IsValid() {
			continue
		}
		a := ap.Addr()
		if a.IsUnspecified() || a.IsMulticast() || a.IsLinkLocalUnicast() && a.Zone() == "" {
			continue
		}
		if a.IsLoopback() {
			if sameHost {
				loop = append(loop, ap)
			}
			continue
		}
		eps = append(eps, ap)
	}
	return append(loop, eps...)
}

// formatTCPEndpoints is MetaTCP's value for eps, cut to maxMetaTCPLen.
func formatTCPEndpoints(eps []netip.AddrPort) string {
	var b strings.Builder
	for i, ap := range eps {
		s := ap.String()
		if i >= maxTCPEndpoints || b.Len()+len(s)+1 > maxMetaTCPLen {
			break
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s)
	}
	return b.String()
}

// Lane returns the lane the conn runs on — "ucx" or "tcp" (a kernel TCP
// connection) — and why it was chosen, e.g. "kernel tcp: no UCX transport
// better than tcp to this peer" or "same host: shared memory".
func (c *Conn) Lane() (lane, reason string) {
	if c.lane != nil {
		return LaneTCP, c.laneWhy
	}
	if c.laneWhy == "" {
		return LaneUCX, reasonAcceptedUCX
	}
	return LaneUCX, c.laneWhy
}

// LaneInfo says which lane a dial to name from t would take, and why (for
// ucxnet info and demo). It resolves name but connects to nothing.
type LaneInfo struct {
	Lane      string   // LaneUCX or LaneTCP; "" when neither reaches the peer
	Reason    string   // why (or why neither)
	Endpoints []string // the TCP endpoints the entry publishes that a dial would try
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
	info := LaneInfo{Lane: ch.lane, Reason: ch.reason}
	if ch.err != nil {
		info.Reason = ch.err.Error()
	}
	for _, ap := range eps {
		info.Endpoints = append(info.Endpoints, ap.String())
	}
	return info, nil
}

// sortEndpoints puts IPv4 before IPv6 and loopback last (a listener's
// publication order).
func sortEndpoints(eps []netip.AddrPort) {
	rank := func(a netip.Addr) int {
		switch {
		case a.IsLoopback():
			return 2
		case a.Is4() || a.Is4In6():
			return 0
		}
		return 1
	}
	slices.SortStableFunc(eps, func(x, y netip.AddrPort) int { return rank(x.Addr()) - rank(y.Addr()) })
}

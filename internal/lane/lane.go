// Package lane decides which way a ucxnet conn goes: the UCX lane (active
// messages over the UCX worker) where UCX has something better than its
// own tcp transport to the peer — shared memory on one host, RDMA between
// hosts — and the kernel TCP lane (a plain *net.TCPConn) where UCX would
// only have tcp: there Go's TCP makes no user-space copy and gives each
// conn its own socket. Decide makes the choice from what the dialer knows
// before it connects (the registry entry, its own worker address, the
// configuration) and says why, in the spirit of SMC-R's fallback reasons
// (smcss). The package also holds the kernel-TCP lane's wire and sockets:
// the TCP endpoints a listener publishes, the preamble each connection
// starts with, where a listener listens and its accept loops, a conn's
// reads and writes, the dial to a listener's endpoints, keepalive and
// resets. It uses no cgo.
package lane

import (
	"net/netip"
	"slices"
	"strings"
)

// The lanes, as ucxnet's Config.Lane names them.
const (
	UCX = "ucx" // UCX active messages
	TCP = "tcp" // a kernel TCP connection (Go's net)
)

// The reasons a lane is chosen.
const (
	ReasonForcedConfig = "forced by config (Config.Lane)"
	ReasonForcedEnv    = "forced by UCXNET_LANE"
	ReasonUCXTLS       = "UCX_TLS set: the user asked for UCX transports"
	ReasonNoTCPPeer    = "peer publishes no TCP endpoint"
	ReasonNoUCXHere    = "kernel tcp: this process has no UCX"
	ReasonNoUCXPeer    = "kernel tcp: peer has no UCX"
	ReasonSharedMemory = "same host: shared memory"
	ReasonRDMA         = "RDMA to this peer"
	ReasonOnlyTCP      = "kernel tcp: no UCX transport better than tcp to this peer"
	ReasonFallback     = "the kernel tcp lane failed: UCX"
)

// Offer is what a UCX worker address offers a peer, as far as the lane
// goes.
type Offer struct {
	SharedMemory bool // a shared-memory transport (same host only)
	RDMA         bool // an RDMA transport
}

// Facts are the inputs of the lane decision.
type Facts struct {
	Forced   string // UCX, TCP or "" (auto)
	ForcedBy string // the reason a forced lane gives
	UCXTLS   bool   // UCX_TLS is set (environment or configuration)
	HaveUCX  bool   // this process runs UCX
	PeerTCP  bool   // the entry publishes a usable TCP endpoint
	PeerUCX  bool   // the entry's address is a UCX worker address this build reads
	SameHost bool   // the entry's host is ours
	Local    Offer  // what this process's worker address offers
	Peer     Offer  // what the entry's address offers
}

// Choice is a lane decision: the lane and why, or why neither works.
type Choice struct {
	Lane   string // UCX or TCP; "" when neither reaches the peer
	Reason string // why the lane, or why neither (then the dial is refused)
	// Fallback: the lane is TCP, chosen rather than UCX, which both ends
	// have: a dial whose TCP connection fails (refused, reset, silent)
	// takes UCX instead.
	Fallback bool
}

// Decide picks the lane for a dial. It is pure: every input is in f.
func Decide(f Facts) Choice {
	ucx := func(why string) Choice { return Choice{Lane: UCX, Reason: why} }
	tcp := func(why string) Choice { return Choice{Lane: TCP, Reason: why} }
	fail := func(why string) Choice { return Choice{Reason: why} }
	switch f.Forced {
	case TCP:
		if !f.PeerTCP {
			return fail("lane " + TCP + " (" + f.ForcedBy + "), but the peer publishes no TCP endpoint")
		}
		return tcp(f.ForcedBy)
	case UCX:
		if !f.HaveUCX {
			return fail("lane " + UCX + " (" + f.ForcedBy + "), but this process has no UCX")
		}
		if !f.PeerUCX {
			return fail("lane " + UCX + " (" + f.ForcedBy + "), but the peer has no UCX")
		}
		return ucx(f.ForcedBy)
	}
	switch {
	case !f.PeerTCP && f.HaveUCX:
		return ucx(ReasonNoTCPPeer)
	case !f.PeerTCP:
		return fail("the peer publishes no TCP endpoint and this process has no UCX")
	case !f.HaveUCX:
		return tcp(ReasonNoUCXHere)
	case !f.PeerUCX:
		return tcp(ReasonNoUCXPeer)
	case f.UCXTLS:
		return ucx(ReasonUCXTLS)
	case f.SameHost && f.Local.SharedMemory && f.Peer.SharedMemory:
		return ucx(ReasonSharedMemory)
	case f.Local.RDMA && f.Peer.RDMA:
		return ucx(ReasonRDMA)
	}
	ch := tcp(ReasonOnlyTCP)
	ch.Fallback = true
	return ch
}

// MaxEndpoints bounds the endpoints a listener publishes and a dialer
// reads from an entry; MaxMetaLen bounds their published form.
const (
	MaxEndpoints = 16
	MaxMetaLen   = 1024
)

// ParseEndpoints reads a listener's published TCP endpoints: at most
// MaxEndpoints "ip:port" literals separated by commas (no names: nothing
// is looked up), port not 0, no multicast or unspecified address.
// Loopback endpoints are kept only for an entry of this host (another
// host's loopback is ours), and come first then. Anything else is
// skipped.
func ParseEndpoints(v string, sameHost bool) []netip.AddrPort {
	if v == "" || len(v) > MaxMetaLen {
		return nil
	}
	var eps, loop []netip.AddrPort
	for i, s := range strings.Split(v, ",") {
		if i >= MaxEndpoints {
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

// FormatEndpoints is the published form of eps, cut to MaxEndpoints and
// MaxMetaLen.
func FormatEndpoints(eps []netip.AddrPort) string {
	var b strings.Builder
	for i, ap := range eps {
		s := ap.String()
		if i >= MaxEndpoints || b.Len()+len(s)+1 > MaxMetaLen {
			break
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s)
	}
	return b.String()
}

// SortEndpoints puts IPv4 before IPv6 and loopback last (a listener's
// publication order).
func SortEndpoints(eps []netip.AddrPort) {
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

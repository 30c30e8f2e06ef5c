package lane

// The kernel-TCP lane's sockets: where a listener listens, keepalive, the
// reset, and what the kernel says of a connection (Info, info_linux.go).

import (
	"net"
	"net/netip"
	"strings"
	"time"
)

// ListenAddr is one address for a listener to bind ("": all), and the
// addresses it publishes.
type ListenAddr struct {
	Bind    string
	Publish []netip.Addr
}

// ListenAddrs returns where a listener listens on kernel TCP, as UCX's tcp
// transport would for UCX_NET_DEVICES=devices: every address (published
// one by one) when devices is "" or "all", else the addresses of the
// network interfaces devices names (RDMA devices, "mlx5_0:1", are
// skipped).
func ListenAddrs(devices string) ([]ListenAddr, error) {
	devices = strings.TrimSpace(devices)
	if devices == "" || devices == "all" {
		ifs, err := net.Interfaces()
		if err != nil {
			return nil, err
		}
		var pub []netip.Addr
		for _, ifc := range ifs {
			pub = append(pub, ifaceAddrs(ifc)...)
		}
		if len(pub) == 0 {
			return nil, nil
		}
		return []ListenAddr{{Bind: "", Publish: pub}}, nil
	}
	var out []ListenAddr
	for _, d := range strings.Split(devices, ",") {
		d = strings.TrimSpace(d)
		if d == "" || strings.Contains(d, ":") {
			continue
		}
		ifc, err := net.InterfaceByName(d)
		if err != nil {
			continue // UCX ignores a device it does not find too
		}
		for _, a := range ifaceAddrs(*ifc) {
			out = append(out, ListenAddr{Bind: a.String(), Publish: []netip.Addr{a}})
		}
	}
	return out, nil
}

// ifaceAddrs is an up interface's unicast addresses a peer can dial
// (link-local IPv6, which needs a zone, left out).
func ifaceAddrs(ifc net.Interface) []netip.Addr {
	if ifc.Flags&net.FlagUp == 0 {
		return nil
	}
	as, err := ifc.Addrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range as {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if ip.IsLinkLocalUnicast() || ip.IsMulticast() || ip.IsUnspecified() {
			continue
		}
		out = append(out, ip)
	}
	return out
}

// SetKeepAlive applies a conn's KeepAlive (Config, Dialer or
// ListenConfig) to its TCP connection as net.Dialer.KeepAlive does:
// probes from KeepAlive of silence, KeepAlive apart, and nine unanswered
// fail the conn with ECONNRESET (the kernel counts in whole seconds: at
// least 1 s each). Negative: Go's defaults (15 s). The kernel probes only an idle
// connection; data unacknowledged is bounded by TCP's retransmissions
// (tcp_retries2), not here: TCP_USER_TIMEOUT would also end a live conn
// whose reader stopped reading (zero-window probes count as unanswered,
// TestTCPLaneStalledReaderKept).
func SetKeepAlive(tc *net.TCPConn, ka time.Duration) {
	if ka <= 0 {
		return
	}
	_ = tc.SetKeepAliveConfig(net.KeepAliveConfig{
		Enable: true, Idle: max(ka, time.Second), Interval: max(ka, time.Second), Count: 9,
	})
}

// Reset closes tc with a RST.
func Reset(tc *net.TCPConn) {
	_ = tc.SetLinger(0)
	_ = tc.Close()
}

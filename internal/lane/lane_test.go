package lane

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The lane decision, situation by situation (the table in the README).
func TestDecide(t *testing.T) {
	shm := Offer{SharedMemory: true}
	rdma := Offer{RDMA: true}
	tcpOnly := Offer{}
	base := Facts{HaveUCX: true, PeerTCP: true, PeerUCX: true}
	with := func(f func(*Facts)) Facts { x := base; f(&x); return x }
	for _, tc := range []struct {
		name   string
		f      Facts
		lane   string
		reason string
	}{
		{"no tcp endpoint (older listener)", with(func(f *Facts) { f.PeerTCP = false }), UCX, ReasonNoTCPPeer},
		{"same host, shared memory", with(func(f *Facts) { f.SameHost, f.Local, f.Peer = true, shm, shm }), UCX, ReasonSharedMemory},
		{"other host, RDMA both", with(func(f *Facts) { f.Local, f.Peer = rdma, rdma }), UCX, ReasonRDMA},
		{"other host, RDMA here only", with(func(f *Facts) { f.Local, f.Peer = rdma, tcpOnly }), TCP, ReasonOnlyTCP},
		{"other host, tcp only", with(func(f *Facts) { f.Local, f.Peer = shm, shm }), TCP, ReasonOnlyTCP},
		{"same host, no shared memory", with(func(f *Facts) { f.SameHost, f.Local, f.Peer = true, tcpOnly, shm }), TCP, ReasonOnlyTCP},
		{"UCX_TLS set", with(func(f *Facts) { f.UCXTLS, f.Local, f.Peer = true, tcpOnly, tcpOnly }), UCX, ReasonUCXTLS},
		{"peer without UCX", with(func(f *Facts) { f.PeerUCX = false; f.UCXTLS = true }), TCP, ReasonNoUCXPeer},
		{"no UCX here", with(func(f *Facts) { f.HaveUCX = false; f.UCXTLS = true }), TCP, ReasonNoUCXHere},
		{"forced tcp", with(func(f *Facts) {
			f.Forced, f.ForcedBy, f.SameHost, f.Local, f.Peer = TCP, ReasonForcedConfig, true, shm, shm
		}), TCP, ReasonForcedConfig},
		{"forced ucx", with(func(f *Facts) { f.Forced, f.ForcedBy = UCX, ReasonForcedEnv }), UCX, ReasonForcedEnv},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := Decide(tc.f)
			require.Equal(t, tc.lane, ch.Lane)
			require.Equal(t, tc.reason, ch.Reason)
			// UCX is a fallback only where auto chose TCP over it.
			require.Equal(t, tc.reason == ReasonOnlyTCP, ch.Fallback)
		})
	}
	// Neither lane reaches the peer: no lane, and the reason says why.
	for _, f := range []Facts{
		with(func(f *Facts) { f.Forced, f.PeerTCP = TCP, false }),
		with(func(f *Facts) { f.Forced, f.PeerUCX = UCX, false }),
		with(func(f *Facts) { f.Forced, f.HaveUCX = UCX, false }),
		with(func(f *Facts) { f.HaveUCX, f.PeerTCP = false, false }),
	} {
		ch := Decide(f)
		require.Empty(t, ch.Lane, "%+v", f)
		require.NotEmpty(t, ch.Reason, "%+v", f)
	}
}

// A published endpoint list is hostile: only literal ip:port endpoints
// are kept, at most MaxEndpoints, and loopback only for an entry of this
// host (another host's loopback would be ours).
func TestParseEndpoints(t *testing.T) {
	v := "10.0.0.1:80, 127.0.0.1:81,[::1]:82,example.com:83,10.0.0.2:0,0.0.0.0:84,224.0.0.1:85,[fe80::1]:86,junk,[2001:db8::1]:87"
	got := ParseEndpoints(v, false)
	require.Equal(t, []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:80"), netip.MustParseAddrPort("[2001:db8::1]:87")}, got)
	got = ParseEndpoints(v, true)
	require.Equal(t, "127.0.0.1:81", got[0].String())
	require.Len(t, got, 4)
	require.Nil(t, ParseEndpoints(strings.Repeat("1.2.3.4:5,", 200), true), "over MaxMetaLen")
	many := strings.TrimSuffix(strings.Repeat("1.2.3.4:5,", 40), ",")
	require.Len(t, ParseEndpoints(many, false), MaxEndpoints)
	eps := []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("[2001:db8::1]:1"), netip.MustParseAddrPort("10.1.1.1:1")}
	SortEndpoints(eps)
	require.Equal(t, "10.1.1.1:1,[2001:db8::1]:1,127.0.0.1:1", FormatEndpoints(eps))
}

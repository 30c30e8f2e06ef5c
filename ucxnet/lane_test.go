package ucxnet

import (
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/ucxconf"
)

// The lane decision, situation by situation (the table in the README).
func TestLaneDecision(t *testing.T) {
	shm := addressOffer{SharedMemory: true, TCP: true}
	rdma := addressOffer{RDMA: true, TCP: true}
	tcpOnly := addressOffer{TCP: true}
	base := laneFacts{haveUCX: true, peerTCP: true, peerUCX: true}
	with := func(f func(*laneFacts)) laneFacts { x := base; f(&x); return x }
	for _, tc := range []struct {
		name   string
		f      laneFacts
		lane   string
		reason string
	}{
		{"no tcp endpoint (older listener)", with(func(f *laneFacts) { f.peerTCP = false }), LaneUCX, reasonNoTCPPeer},
		{"same host, shared memory", with(func(f *laneFacts) { f.sameHost, f.local, f.peer = true, shm, shm }), LaneUCX, reasonSharedMemory},
		{"other host, RDMA both", with(func(f *laneFacts) { f.local, f.peer = rdma, rdma }), LaneUCX, reasonRDMA},
		{"other host, RDMA here only", with(func(f *laneFacts) { f.local, f.peer = rdma, tcpOnly }), LaneTCP, reasonOnlyTCP},
		{"other host, tcp only", with(func(f *laneFacts) { f.local, f.peer = shm, shm }), LaneTCP, reasonOnlyTCP},
		{"same host, no shared memory", with(func(f *laneFacts) { f.sameHost, f.local, f.peer = true, tcpOnly, shm }), LaneTCP, reasonOnlyTCP},
		{"UCX_TLS set", with(func(f *laneFacts) { f.ucxTLS, f.local, f.peer = true, tcpOnly, tcpOnly }), LaneUCX, reasonUCXTLS},
		{"peer without UCX", with(func(f *laneFacts) { f.peerUCX = false; f.ucxTLS = true }), LaneTCP, reasonNoUCXPeer},
		{"no UCX here", with(func(f *laneFacts) { f.haveUCX = false; f.ucxTLS = true }), LaneTCP, reasonNoUCXHere},
		{"forced tcp", with(func(f *laneFacts) {
			f.forced, f.forcedBy, f.sameHost, f.local, f.peer = LaneTCP, reasonForcedConfig, true, shm, shm
		}), LaneTCP, reasonForcedConfig},
		{"forced ucx", with(func(f *laneFacts) { f.forced, f.forcedBy = LaneUCX, reasonForcedEnv }), LaneUCX, reasonForcedEnv},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := decideLane(tc.f)
			require.NoError(t, ch.err)
			require.Equal(t, tc.lane, ch.lane)
			require.Equal(t, tc.reason, ch.reason)
		})
	}
	for _, f := range []laneFacts{
		with(func(f *laneFacts) { f.forced, f.peerTCP = LaneTCP, false }),
		with(func(f *laneFacts) { f.forced, f.peerUCX = LaneUCX, false }),
		with(func(f *laneFacts) { f.forced, f.haveUCX = LaneUCX, false }),
		with(func(f *laneFacts) { f.haveUCX, f.peerTCP = false, false }),
	} {
		ch := decideLane(f)
		require.ErrorIs(t, ch.err, syscall.ECONNREFUSED, "%+v", f)
	}
}

// A MetaTCP value from the registry is hostile: only literal ip:port
// endpoints are kept, at most maxTCPEndpoints, and loopback only for an
// entry of this host (another host's loopback would be ours).
func TestLaneParseEndpoints(t *testing.T) {
	v := "10.0.0.1:80, 127.0.0.1:81,[::1]:82,example.com:83,10.0.0.2:0,0.0.0.0:84,224.0.0.1:85,[fe80::1]:86,junk,[2001:db8::1]:87"
	got := parseTCPEndpoints(v, false)
	require.Equal(t, []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:80"), netip.MustParseAddrPort("[2001:db8::1]:87")}, got)
	got = parseTCPEndpoints(v, true)
	require.Equal(t, "127.0.0.1:81", got[0].String())
	require.Len(t, got, 4)
	require.Nil(t, parseTCPEndpoints(strings.Repeat("1.2.3.4:5,", 200), true), "over maxMetaTCPLen")
	many := strings.TrimSuffix(strings.Repeat("1.2.3.4:5,", 40), ",")
	require.Len(t, parseTCPEndpoints(many, false), maxTCPEndpoints)
	eps := []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("[2001:db8::1]:1"), netip.MustParseAddrPort("10.1.1.1:1")}
	sortEndpoints(eps)
	require.Equal(t, "10.1.1.1:1,[2001:db8::1]:1,127.0.0.1:1", formatTCPEndpoints(eps))
	require.Error(t, checkLane("rdma"))
	_, err := NewTransport(Config{Lane: "bogus"})
	require.Error(t, err)
}

// In one process (one host) the auto lane is UCX, for shared memory, or
// because UCX_TLS is set; the listener publishes its TCP endpoint all the
// same (where UCX's tcp would listen).
func TestLaneAutoSameHost(t *testing.T) {
	if !haveUCXBuild() {
		t.Skip("a build without UCX")
	}
	p := newPair(t, Config{Lane: LaneAuto}) // whatever UCXNET_LANE says
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	lane, why := c.(*Conn).Lane()
	t.Logf("lane %s: %s; transports %v", lane, why, c.(*Conn).Transports())
	require.Equal(t, LaneUCX, lane)
	info, err := p.client.LaneTo(p.ln.Addr().String())
	require.NoError(t, err)
	require.Equal(t, LaneUCX, info.Lane)
	require.Equal(t, why, info.Reason)
	if tls, set := os.LookupEnv("UCX_TLS"); set {
		if ucxconf.TCPEnabled(tls) {
			require.Equal(t, reasonUCXTLS, why)
		} else {
			require.Equal(t, reasonNoTCPPeer, why, "UCX_TLS without tcp keeps the listener off TCP")
			require.Empty(t, info.Endpoints)
		}
		return
	}
	require.Equal(t, reasonSharedMemory, why)
	o, err := offerOf(p.client.eng.Address())
	require.NoError(t, err)
	require.True(t, o.SharedMemory && o.TCP, "%v", o.Transports)
	require.NotEmpty(t, info.Endpoints)
}

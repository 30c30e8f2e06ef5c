package session

import (
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/lane"
	"github.com/ucxnet/ucxnet/internal/ucxconf"
)

// ucxnet's lane names are internal/lane's, whose tests cover the
// decision situation by situation; a dial no lane takes is refused
// (ECONNREFUSED) with the decision's reason.
func TestLaneDecision(t *testing.T) {
	require.Equal(t, lane.UCX, LaneUCX)
	require.Equal(t, lane.TCP, LaneTCP)
	require.Contains(t, lane.ReasonForcedEnv, EnvLane)
	require.NoError(t, laneRefused(lane.Choice{Lane: LaneTCP, Reason: lane.ReasonOnlyTCP}))
	err := laneRefused(lane.Decide(lane.Facts{Forced: LaneTCP, ForcedBy: lane.ReasonForcedConfig}))
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.Contains(t, err.Error(), "publishes no TCP endpoint")
}

// An unknown lane is refused, in Config.Lane as in $UCXNET_LANE.
func TestLaneUnknown(t *testing.T) {
	require.Error(t, checkLane("rdma"))
	_, err := newUCXTransport(Config{Lane: "bogus"})
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
	name, why := c.(*testConn).Lane()
	t.Logf("lane %s: %s; transports %v", name, why, c.(*testConn).Transports())
	require.Equal(t, LaneUCX, name)
	info, err := p.client.LaneTo(p.ln.Addr().String())
	require.NoError(t, err)
	require.Equal(t, LaneUCX, info.Lane)
	require.Equal(t, why, info.Reason)
	if tls, set := os.LookupEnv("UCX_TLS"); set {
		if ucxconf.TCPEnabled(tls) {
			require.Equal(t, lane.ReasonUCXTLS, why)
		} else {
			require.Equal(t, lane.ReasonNoTCPPeer, why, "UCX_TLS without tcp keeps the listener off TCP")
			require.Empty(t, info.Endpoints)
		}
		return
	}
	require.Equal(t, lane.ReasonSharedMemory, why)
	o, err := testUCX.Offer(p.client.eng.Address())
	require.NoError(t, err)
	require.True(t, o.SharedMemory && o.TCP, "%v", o.Transports)
	require.NotEmpty(t, info.Endpoints)
}

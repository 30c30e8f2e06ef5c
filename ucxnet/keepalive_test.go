package ucxnet

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// SetKeepAliveConfig drives a conn's keepalive as it does a
// *net.TCPConn's: with the transport's keepalive off, turning it on for
// one UCX-lane conn makes its peer probed (the answered PING gives the
// RTT); on the kernel-TCP lane it sets the socket's. On a closed conn it
// fails with net.ErrClosed in a *net.OpError.
func TestConnSetKeepAliveConfig(t *testing.T) {
	for _, lane := range []string{LaneUCX, LaneTCP} {
		t.Run(lane, func(t *testing.T) {
			p := newPair(t, Config{Lane: lane, KeepAlive: -1})
			c, s := p.conns(t)
			defer s.Close()
			uc := c.(*Conn)
			require.NoError(t, uc.SetKeepAlive(false))
			require.NoError(t, uc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: 50 * time.Millisecond, Interval: 50 * time.Millisecond, Count: 3}))
			if lane == LaneUCX {
				require.Eventually(t, func() bool { return uc.Stats().RTT > 0 }, 20*time.Second, 10*time.Millisecond,
					"the conn's keepalive never probed its peer")
			}
			require.NoError(t, c.Close())
			err := uc.SetKeepAlive(true)
			var op *net.OpError
			require.True(t, errors.As(err, &op), "%T %v", err, err)
			if lane == LaneUCX {
				require.ErrorIs(t, err, net.ErrClosed)
			}
		})
	}
}

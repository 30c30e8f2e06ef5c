package session

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/registry"
)

// A dial to a listener that never answers (its process is stopped) times
// out with a net.Error whose Timeout() is true, from the Dialer's Timeout
// (not before it).
func TestDialTimeoutSilentPeer(t *testing.T) {
	p := newPair(t, Config{})
	// A raw peer that publishes a name but never answers CONNECT.
	raw := newRawPeer(t, p.server)
	vouchFor(p.client, raw.eng.Address())
	e := registryEntry(t, "silent", raw.eng.Address())
	require.NoError(t, p.client.Registry().Register(context.Background(), e))
	d := Dialer{Transport: p.client, Timeout: 300 * time.Millisecond}
	start := time.Now()
	_, err := d.Dial(Network, "silent")
	require.Error(t, err)
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout(), "%v", err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.GreaterOrEqual(t, time.Since(start), d.Timeout)
}

func registryEntry(t *testing.T, name string, addr []byte) registry.Entry {
	t.Helper()
	pid, start, host := registry.CurrentProcess()
	return registry.Entry{Name: name, Address: addr, PID: pid, StartTime: start, Host: host}
}

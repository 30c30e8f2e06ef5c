package ucxnet

import (
	"encoding/json"
	"expvar"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/registry"
)

// PublishExpvar publishes every open transport with its listeners and
// conns; publishing twice is fine, and a name taken by someone else is
// an error, not a panic.
func TestPublishExpvar(t *testing.T) {
	p := newPair(t, Config{})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	require.NoError(t, PublishExpvar())
	require.NoError(t, PublishExpvar(), "again")

	var snaps []Snapshot
	require.NoError(t, json.Unmarshal([]byte(expvar.Get(ExpvarName).String()), &snaps))
	byName := map[string]Snapshot{}
	for _, s := range snaps {
		byName[s.Transport] = s
	}
	srv, ok := byName[p.server.Name()]
	require.True(t, ok, "the server transport is published")
	require.Equal(t, []string{p.ln.Addr().String()}, srv.Listeners)
	require.Len(t, srv.Conns, 1)
	require.Equal(t, s.(*Conn).id, srv.Conns[0].ID)
	require.Positive(t, srv.PID)
	cli, ok := byName[p.client.Name()]
	require.True(t, ok, "the client transport is published")
	require.Equal(t, c.LocalAddr().String(), cli.Conns[0].Local)

	p.client.Close()
	require.NoError(t, json.Unmarshal([]byte(expvar.Get(ExpvarName).String()), &snaps))
	for _, s := range snaps {
		require.NotEqual(t, p.client.Name(), s.Transport, "a closed transport is not published")
	}
}

func TestPublishExpvarTaken(t *testing.T) {
	// expvar cannot unpublish: the clash is checked under another name,
	// taken by a foreign variable.
	if expvar.Get("ucxnet-test-taken") == nil {
		expvar.NewInt("ucxnet-test-taken")
	}
	require.Error(t, publishExpvarAs("ucxnet-test-taken"))
}

// A stats client that connects and sends nothing does not hold up
// Transport.Close: the connection is ended, not waited out.
func TestStatsSilentClientDoesNotHoldClose(t *testing.T) {
	defer func(d time.Duration) { statsTimeout = d }(statsTimeout)
	statsTimeout = time.Hour
	tr, err := NewTransport(Config{Registry: registry.NewMemory(), StatsDir: t.TempDir()})
	require.NoError(t, err)
	if tr.StatsSocket() == "" {
		tr.Close()
		t.Skip("this platform serves no stats socket")
	}
	c, err := net.Dial("unix", tr.StatsSocket())
	require.NoError(t, err)
	defer c.Close()
	// A byte short of a request line keeps the server reading, once it
	// serves the connection (holds a place of the semaphore).
	_, err = c.Write([]byte("u"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(tr.statsSrv.sem) == 1 }, 30*time.Second, time.Millisecond, "the connection is not served")
	closed := make(chan error, 1)
	go func() { closed <- tr.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(60 * time.Second): // a hang guard, far below the hour
		t.Fatal("Transport.Close waits for a silent stats client")
	}
	_, err = c.Read(make([]byte, 1))
	require.Error(t, err, "the stats connection is still open")
}

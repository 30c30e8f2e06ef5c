package session

import (
	"encoding/json"
	"expvar"
	"testing"

	"github.com/stretchr/testify/require"
)

// PublishExpvar publishes every open transport with its listeners and
// conns; publishing twice is fine, and a name taken by someone else is
// an error, not a panic.
func TestPublishExpvar(t *testing.T) {
	forEachEngine(t, Config{}, func(t *testing.T, p *pair) {
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
		require.Equal(t, s.(*testConn).id, srv.Conns[0].ID)
		require.Positive(t, srv.PID)
		cli, ok := byName[p.client.Name()]
		require.True(t, ok, "the client transport is published")
		require.Equal(t, c.LocalAddr().String(), cli.Conns[0].Local)

		p.client.Close()
		require.NoError(t, json.Unmarshal([]byte(expvar.Get(ExpvarName).String()), &snaps))
		for _, s := range snaps {
			require.NotEqual(t, p.client.Name(), s.Transport, "a closed transport is not published")
		}
	})
}

func TestPublishExpvarTaken(t *testing.T) {
	// expvar cannot unpublish: the clash is checked under another name,
	// taken by a foreign variable.
	if expvar.Get("ucxnet-test-taken") == nil {
		expvar.NewInt("ucxnet-test-taken")
	}
	require.Error(t, publishExpvarAs("ucxnet-test-taken"))
}

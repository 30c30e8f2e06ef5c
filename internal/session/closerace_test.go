package session

// Both ends of a conn closing at once: each must still send its FIN, and
// both conn tables must drain.

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// waitDrained waits (bounded: a leak, not slowness, fails it) until both
// transports' conn tables hold only keep conns each.
func waitDrained(t *testing.T, a, b *Transport, keep uint64) {
	t.Helper()
	require.Eventually(t, func() bool { return a.Stats().OpenConns == keep && b.Stats().OpenConns == keep },
		30*time.Second, 5*time.Millisecond,
		"conns left open after both ends closed: %d and %d, want %d", a.Stats().OpenConns, b.Stats().OpenConns, keep)
}

// keeper opens a conn that stays open for the test, so that the endpoint
// between the transports is never idle (an idle endpoint is closed after
// idlePeer, which would end a leaked conn too and hide the leak), then
// closes both ends and checks that the tables drain.
func keeper(t *testing.T, p *pair) {
	t.Helper()
	c, s := p.conns(t)
	t.Cleanup(func() {
		c.Close()
		s.Close()
		if !t.Failed() {
			waitDrained(t, p.server, p.client, 0)
		}
	})
}

// TestMemCloseBothEndsRace forces the interleaving that leaked conns: the
// peer's FIN arrives after Close has marked the conn closed but before
// Close has sent its own FIN. Holding the conn's writer lock (as a Write in
// progress does) parks Close right there. The old receive path took the
// peer's FIN as final, removed the conn, and Close then sent no FIN: the
// peer's conn waited for it for ever.
func TestMemCloseBothEndsRace(t *testing.T) {
	p := newMemPair(t, Config{})
	keeper(t, p.pair)
	const n = 50
	for range n {
		c, s := p.conns(t)
		sc := s.(*testConn)
		sc.wmu.Lock()
		closed := make(chan error, 1)
		go func() { closed <- sc.Close() }()
		require.Eventually(t, func() bool {
			sc.mu.Lock()
			defer sc.mu.Unlock()
			return sc.state.Closed
		}, 10*time.Second, time.Millisecond, "Close did not start")
		require.NoError(t, c.Close()) // its FIN reaches sc while sc's Close is parked
		require.Eventually(t, func() bool {
			sc.mu.Lock()
			defer sc.mu.Unlock()
			return sc.state.FinIn || sc.state.Phase == PhaseDone
		}, 10*time.Second, time.Millisecond, "the client's FIN did not arrive")
		sc.wmu.Unlock()
		require.NoError(t, <-closed)
	}
	waitDrained(t, p.server, p.client, 1)
}

// TestCloseBothEndsDrains closes many conns from both ends at once over
// UCX (UCX_TLS picks tcp or sm), as an HTTP server's Shutdown racing its
// clients does: no conn may stay in either table waiting for a FIN.
func TestCloseBothEndsDrains(t *testing.T) {
	p := newPair(t, Config{})
	keeper(t, p)
	const n = 200
	var cs, ss []net.Conn
	for range n {
		c, s := p.conns(t)
		cs, ss = append(cs, c), append(ss, s)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		for _, c := range []net.Conn{cs[i], ss[i]} {
			wg.Go(func() {
				<-start
				c.Close()
			})
		}
	}
	close(start)
	wg.Wait()
	waitDrained(t, p.server, p.client, 1)
}

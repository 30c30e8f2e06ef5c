package session

import (
	"bytes"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// With two workers a side, a dial accepted on the listener's first worker
// gets its ACCEPT through the endpoint its CONNECT went to, while the
// dialer's peer for that worker holds only the dial itself and the From
// of an endpoint the listener's idle sweep closed since. The ACCEPT must
// bind the dial: a dial waiting for its answer is no claim on the peer.
// Before, the dial counted as a conn of the peer, and the dial failed
// with ErrProtocol "bad ACCEPT: worker address refused".
func TestMemAcceptOnFirstWorkerAfterIdleClose(t *testing.T) {
	p := newMemPair(t, Config{Workers: 2, Window: 256 << 10})
	dial := func() (*testConn, *testConn) {
		p.client.nextDial.Store(0)   // client worker 1
		p.server.nextAccept.Store(1) // server worker 0, where CONNECTs arrive
		acc := make(chan net.Conn, 1)
		go func() { s, _ := p.ln.Accept(); acc <- s }()
		c, err := p.dialer.Dial(Network, p.ln.Addr().String())
		require.NoError(t, err)
		s := (<-acc).(*testConn)
		require.Equal(t, 0, s.sh.idx)
		go func() { _, _ = echoAll(s) }()
		return c.(*testConn), s
	}
	c1, s1 := dial()
	echoes(t, c1, "first")
	require.NoError(t, c1.Close())
	require.NoError(t, s1.Close())
	waitNoConns(t, p.client)
	waitNoConns(t, p.server)
	s1.peer().close(false) // as its idle sweep does
	c2, s2 := dial()
	defer c2.Close()
	defer s2.Close()
	echoes(t, c2, "after the listener's sweep")
}

// echoAll echoes s until it ends.
func echoAll(s net.Conn) (int64, error) {
	b := make([]byte, 4096)
	var n int64
	for {
		k, err := s.Read(b)
		if k > 0 {
			if _, werr := s.Write(b[:k]); werr != nil {
				return n, werr
			}
			n += int64(k)
		}
		if err != nil {
			return n, err
		}
	}
}

// A dial that refuses its ACCEPT (here: it names a worker whose peer
// holds a bound conn that, as the dialer sees it, comes from another
// endpoint) answers it with an RST, and the conn the listener queued is
// reset. Before, the dialer sent nothing, and the application accepted a
// conn that was reset only after twice its KeepAlive.
func TestMemRefusedAcceptReset(t *testing.T) {
	p := newMemPair(t, Config{Workers: 2, Window: 256 << 10})
	c1, _ := dialPinned(t, p.pair) // client worker 1, server worker 1
	p.client.mu.Lock()
	cp := c1.peer()
	require.NotZero(t, cp.from.Load())
	cp.from.Add(1) // the peer's frames now seem to come from elsewhere
	p.client.mu.Unlock()
	p.client.nextDial.Store(0)
	p.server.nextAccept.Store(0) // server worker 1, the claimed one
	rst := p.client.Stats().ResetsSent
	acc := make(chan net.Conn, 1)
	go func() { s, _ := p.ln.Accept(); acc <- s }()
	_, err := p.dialer.Dial(Network, p.ln.Addr().String())
	require.ErrorIs(t, err, ErrProtocol)
	require.ErrorContains(t, err, "worker address refused")
	require.Eventually(t, func() bool { return p.client.Stats().ResetsSent > rst }, 10*time.Second, time.Millisecond,
		"the refused ACCEPT was not answered with RST")
	zc := <-acc
	require.NotNil(t, zc)
	defer zc.Close()
	require.NoError(t, zc.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = zc.Read(make([]byte, 1))
	require.ErrorIs(t, err, syscall.ECONNRESET, "the refused conn was not reset")
}

// A refused dial (no key for a keyed listener) leaves the listener an
// endpoint made only to refuse, which it closes after idleRefusedPeer;
// UCX pairs it with the dialer's endpoint, which then sends into nothing.
// Dials to another listener of that process, at once and after that
// endpoint was swept, must get their answer: the dialer replaces an
// endpoint whose dial was refused, and the listener an endpoint made to
// refuse once a CONNECT comes through another. Before, every dial from
// that worker within a minute failed with "no answer within 3s".
func TestRetryAfterRefusal(t *testing.T) {
	for _, w := range []int{1, 2} {
		t.Run(fmt.Sprint(w), func(t *testing.T) {
			p := newPair(t, Config{Workers: w, Window: 256 << 10})
			lc := ListenConfig{Transport: p.server, PSK: bytes.Repeat([]byte{7}, 32)}
			kl, err := lc.Listen(t.Context(), "keyed-retry")
			require.NoError(t, err)
			defer kl.Close()
			p.client.nextDial.Store(0)
			_, err = p.dialer.Dial(Network, "keyed-retry") // no key: REFUSE
			require.ErrorIs(t, err, syscall.ECONNREFUSED)
			for i, wait := range []time.Duration{0, idleRefusedPeer + 2*time.Second} {
				time.Sleep(wait) // the listener's sweep closes its refusing endpoint
				c, s := dialPinned(t, p)
				echoes(t, c, fmt.Sprintf("retry %d", i))
				require.NoError(t, c.Close())
				require.NoError(t, s.Close())
			}
		})
	}
}

// As TestRetryAfterRefusal, with the listener's sweep run by hand on an
// aged refusing endpoint.
func TestRedialAfterRefusingPeerSwept(t *testing.T) {
	for _, w := range []int{1, 2} {
		t.Run(fmt.Sprint(w), func(t *testing.T) {
			forEachEngine(t, Config{Workers: w, Window: 256 << 10}, func(t *testing.T, p *pair) {
				lc := ListenConfig{Transport: p.server, PSK: bytes.Repeat([]byte{7}, 32)}
				kl, err := lc.Listen(t.Context(), "keyed-sweep")
				require.NoError(t, err)
				defer kl.Close()
				p.client.nextDial.Store(0)
				_, err = p.dialer.Dial(Network, "keyed-sweep")
				require.ErrorIs(t, err, syscall.ECONNREFUSED)
				closed := p.server.Stats().IdlePeersClosed
				ageIdlePeers(p.server, idleRefusedPeer+time.Second)
				for _, s := range p.server.shards {
					asEngine(s, func() { s.sweep.once(time.Now(), false) })
				}
				require.Greater(t, p.server.Stats().IdlePeersClosed, closed, "no endpoint swept")
				c, s := dialPinned(t, p)
				echoes(t, c, "after the sweep")
				require.NoError(t, c.Close())
				require.NoError(t, s.Close())
			})
		})
	}
}

// A dial accepted on another listener worker than its CONNECT's leaves
// the CONNECT's peer as idle as it was: the listener worker's end of that
// peer may have been closed by its idle sweep meanwhile, so the peer must
// still age toward replacement (staleLocked). Before, each such dial
// restarted its idle time, and a later dial accepted on that worker was
// sent into nothing.
func TestMemRebindKeepsIdleSince(t *testing.T) {
	p := newMemPair(t, Config{Workers: 2, Window: 256 << 10})
	p.client.nextDial.Store(0)   // client worker 1
	p.server.nextAccept.Store(1) // server worker 0: the CONNECT's peer carries the conn
	acc := make(chan net.Conn, 1)
	go func() { s, _ := p.ln.Accept(); acc <- s }()
	c1, err := p.dialer.Dial(Network, p.ln.Addr().String())
	require.NoError(t, err)
	s1 := <-acc
	cp := c1.(*testConn).peer()
	require.NoError(t, c1.Close())
	require.NoError(t, s1.Close())
	waitNoConns(t, p.client)
	p.client.mu.RLock()
	idle := cp.idleSince
	p.client.mu.RUnlock()
	c2, _ := dialPinned(t, p.pair) // server worker 1: through cp, rebound
	require.NotSame(t, cp, c2.peer())
	p.client.mu.RLock()
	defer p.client.mu.RUnlock()
	require.Equal(t, idle, cp.idleSince, "the rebound dial restarted the CONNECT peer's idle time")
}

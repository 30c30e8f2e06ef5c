package session

import (
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/stream"
)

// Redials and claims against the From a peer's frames come from (review
// of main at ee2668f, findings 1-3): honest endpoints are replaced every
// idle cycle, so a From that differs from a peer's stale one is no claim.

// dialPinned dials p's listener from the client's last worker, to be
// accepted on the server's last worker (with one worker a side, the
// only ones), and returns both ends, the server's echoing.
func dialPinned(t *testing.T, p *pair) (client, server *testConn) {
	t.Helper()
	c, err := pinnedDial(p)
	require.NoError(t, err, "dial")
	return acceptPinned(t, p, c)
}

// pinnedDial dials p's listener from the client's last worker, to be
// accepted on the server's last worker.
func pinnedDial(p *pair) (net.Conn, error) {
	p.client.nextDial.Store(0)   // the next dial: shard 1 % workers
	p.server.nextAccept.Store(0) // the next accept: shard 1 % workers
	return p.dialer.Dial(Network, p.ln.Addr().String())
}

// acceptPinned accepts the conn that c, a dial to p's listener, opened
// (queued before its ACCEPT was sent), makes it echo, and returns both
// ends after one round trip.
func acceptPinned(t *testing.T, p *pair, c net.Conn) (client, server *testConn) {
	t.Helper()
	s, err := p.ln.Accept()
	if err != nil {
		c.Close()
	}
	require.NoError(t, err, "accept")
	t.Cleanup(func() { c.Close(); s.Close() })
	go func() { _, _ = io.Copy(s, s) }()
	echoes(t, c, "ping")
	return c.(*testConn), s.(*testConn)
}

// waitNoConns waits until tr's conn table is empty.
func waitNoConns(t *testing.T, tr *Transport) {
	t.Helper()
	require.Eventually(t, func() bool { return tr.Stats().OpenConns == 0 }, 10*time.Second, time.Millisecond,
		"conns left: %d", tr.Stats().OpenConns)
}

// After both ends of a conn closed, one side closes its endpoint to the
// other; the next dial between the same two workers comes through a new
// endpoint on that side (a new From at the other), while the other side's
// peer still holds the old From, and must succeed. Before: a listener
// that closed first made the dialer refuse the next ACCEPT as a claim
// (ErrProtocol "bad ACCEPT: worker address refused", with two workers a
// side), and a dialer that closed first had its CONNECT dropped
// unanswered as a claim (ECONNREFUSED after 3 s). Over
// the in-memory engine, where the other end stays usable: over UCX it
// does not (TestRedialAfterIdleSweep).
func TestMemRedialAfterIdleClose(t *testing.T) {
	for _, workers := range []int{1, 2} {
		for _, first := range []string{"listener", "dialer"} {
			t.Run(fmt.Sprintf("%d-workers/%s-first", workers, first), func(t *testing.T) {
				p := newMemPair(t, Config{Workers: workers, Window: 256 << 10})
				testRedialAfterIdleClose(t, p.pair, first == "listener")
			})
		}
	}
}

func testRedialAfterIdleClose(t *testing.T, p *pair, listenerFirst bool) {
	c1, s1 := dialPinned(t, p)
	cp, sp := c1.peer(), s1.peer()
	require.NoError(t, c1.Close())
	require.NoError(t, s1.Close())
	waitNoConns(t, p.client)
	waitNoConns(t, p.server)
	if listenerFirst {
		sp.close(false) // as its idle sweep does
	} else {
		cp.close(false)
	}
	c2, s2 := dialPinned(t, p)
	require.Equal(t, c1.sh.idx, c2.sh.idx, "the redial left the dialer's worker")
	require.Equal(t, s1.sh.idx, s2.sh.idx, "the redial left the listener's worker")
	echoes(t, c2, "after the redial")
}

// A CONNECT from an endpoint the listener never heard of names the worker
// address of a dialer with a live conn, and lands on the listener's first
// worker (where CONNECTs arrive); with two workers a side the dialer's
// conns live on the second. The claim must bind no peer to the claimer,
// and the dialer's later dials from that worker must succeed. Before,
// with two workers, the claim bound the first worker's peer for that
// address to the claimer's endpoint, and every later CONNECT of the real
// worker was dropped as a claim.
func TestMemClaimDoesNotLockOutDialer(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			p := newMemPair(t, Config{Window: 256 << 10, Workers: workers})
			c1, _ := dialPinned(t, p.pair)
			addr := c1.sh.eng.Address()
			st := p.server.Stats()
			handled := func(st Stats) uint64 { return st.Accepts + st.Refused }
			p.server.nextAccept.Store(1) // the claim's conn, if any: shard 0
			hello := stream.Hello{ConnID: 777, EagerMax: 1 << 20, Window: 1 << 16, Name: p.ln.Addr().String(),
				WorkerAddr: addr, Features: stream.FeatureWorkers}
			b, err := hello.MarshalBinary()
			require.NoError(t, err)
			hb := stream.Header{Kind: stream.KindConnect, Length: uint32(len(b))}.Bytes()
			p.srvEng.Inject(memAttacker, hb[:], b)
			waitStat(t, p.server, "the claim handled", handled, handled(st)+1)
			if p.server.Stats().Accepts > st.Accepts {
				// Queued for the application (a conn nobody drives):
				// out of the way of the dials below.
				z, err := p.ln.Accept()
				require.NoError(t, err)
				defer z.Close()
			}
			p.server.mu.RLock()
			for _, s := range p.server.shards {
				require.Nil(t, s.peersByFrom[memAttacker], "the claimer stands for a peer of worker %d", s.idx)
			}
			p.server.mu.RUnlock()
			for range 2 {
				c, _ := dialPinned(t, p.pair)
				require.Equal(t, c1.sh, c.sh, "the dial left the claimed worker")
			}
			echoes(t, c1, "the first conn after the claim")
		})
	}
}

// ageIdlePeers makes every peer of tr without conns look idle for d more.
func ageIdlePeers(tr *Transport, d time.Duration) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, p := range tr.allPeersLocked() {
		if len(p.conns) == 0 {
			p.idleSince = p.idleSince.Add(-d)
		}
	}
}

// Both sides' endpoints between two workers go idle together; one side's
// idle sweep closes its end first, which leaves the other end sending into
// nothing without an error (UCX pairs the two into one connection). The
// next dial between the same workers must still succeed and carry data:
// the side that did not sweep yet does not reuse an endpoint idle that
// long. Before, over UCX, the redial got no answer (ECONNREFUSED after
// 3 s), or its conn died by keepalive.
func TestRedialAfterIdleSweep(t *testing.T) {
	for _, workers := range []int{1, 2} {
		for _, first := range []string{"listener", "dialer"} {
			t.Run(fmt.Sprintf("%d-workers/%s-first", workers, first), func(t *testing.T) {
				forEachEngine(t, Config{Workers: workers, Window: 256 << 10}, func(t *testing.T, p *pair) {
					testRedialAfterIdleSweep(t, p, first == "listener")
				})
			})
		}
	}
}

func testRedialAfterIdleSweep(t *testing.T, p *pair, listenerFirst bool) {
	c1, s1 := dialPinned(t, p)
	require.NoError(t, c1.Close())
	require.NoError(t, s1.Close())
	waitNoConns(t, p.client)
	waitNoConns(t, p.server)
	ageIdlePeers(p.client, idlePeer)
	ageIdlePeers(p.server, idlePeer)
	sweeper := p.client
	if listenerFirst {
		sweeper = p.server
	}
	closed := sweeper.Stats().IdlePeersClosed
	for _, s := range sweeper.shards {
		asEngine(s, func() { s.sweep.once(time.Now(), false) })
	}
	require.Greater(t, sweeper.Stats().IdlePeersClosed, closed, "the sweep closed no endpoint")
	c2, s2 := dialPinned(t, p)
	require.Equal(t, c1.sh.idx, c2.sh.idx, "the redial left the dialer's worker")
	require.Equal(t, s1.sh.idx, s2.sh.idx, "the redial left the listener's worker")
	echoes(t, c2, "after the redial")
}

// A CONNECT from an endpoint the listener never heard of names the worker
// address of a dialer whose conns live on another listener worker than
// the first; the conn it makes is accepted there, and its ACCEPT reaches
// that dialer worker, which dialed nothing of the kind: the dialer
// answers with an RST, and the listener's conn is reset. Before, it
// stayed open and unbound for as long as the dialer lived (its keepalive
// PINGs were answered as strays), so such CONNECTs filled the accept
// backlog and the application.
func TestMemForgedConnectReset(t *testing.T) {
	p := newMemPair(t, Config{Window: 256 << 10, Workers: 2, KeepAlive: 300 * time.Millisecond})
	c1, s1 := dialPinned(t, p.pair)
	rst := p.client.Stats().ResetsSent
	p.server.nextAccept.Store(0) // the forged conn: shard 1, with s1
	hello := stream.Hello{ConnID: 777, EagerMax: 1 << 20, Window: 1 << 16, Name: p.ln.Addr().String(),
		WorkerAddr: c1.sh.eng.Address(), Features: stream.FeatureWorkers}
	b, err := hello.MarshalBinary()
	require.NoError(t, err)
	hb := stream.Header{Kind: stream.KindConnect, Length: uint32(len(b))}.Bytes()
	p.srvEng.Inject(memAttacker, hb[:], b)
	zc, err := p.ln.Accept()
	require.NoError(t, err)
	defer zc.Close()
	z := zc.(*testConn)
	require.Equal(t, s1.sh, z.sh, "the forged conn is not on the honest conn's worker")
	require.NoError(t, z.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = z.Read(make([]byte, 1))
	require.ErrorIs(t, err, syscall.ECONNRESET, "the forged conn was not reset")
	require.Greater(t, p.client.Stats().ResetsSent, rst)
	echoes(t, c1, "the honest conn after the forged one")
}

// A forged CONNECT naming a dialer worker's address lands on a listener
// worker whose endpoint to that dialer worker is new, so the dialer cannot
// tell its ACCEPT from whom and sends no RST; an honest conn of that
// dialer worker then lands on the same listener worker, which keeps the
// peer alive, and makes the endpoint known to the dialer, which from then
// on answers the forged conn's PINGs as strays. The forged conn must still
// be reset: nothing binds it, and a conn unbound after twice its KeepAlive
// is reset. Before, the stray answers bound it and it stayed open.
func TestMemUnboundConnReset(t *testing.T) {
	p := newMemPair(t, Config{Window: 256 << 10, Workers: 2, KeepAlive: 300 * time.Millisecond})
	_, s1 := dialPinned(t, p.pair) // client worker 1, server worker 1
	addr := []byte(s1.peer().addr) // the client worker's address
	p.server.nextAccept.Store(1)   // the forged conn: server worker 0
	hello := stream.Hello{ConnID: 777, EagerMax: 1 << 20, Window: 1 << 16, Name: p.ln.Addr().String(),
		WorkerAddr: addr, Features: stream.FeatureWorkers}
	b, err := hello.MarshalBinary()
	require.NoError(t, err)
	hb := stream.Header{Kind: stream.KindConnect, Length: uint32(len(b))}.Bytes()
	p.srvEng.Inject(memAttacker, hb[:], b)
	zc, err := p.ln.Accept()
	require.NoError(t, err)
	defer zc.Close()
	z := zc.(*testConn)
	require.Equal(t, 0, z.sh.idx)
	// The honest conn from the same client worker, on server worker 0.
	p.client.nextDial.Store(0)
	p.server.nextAccept.Store(1)
	acc := make(chan net.Conn, 1)
	go func() { s, _ := p.ln.Accept(); acc <- s }()
	c2, err := p.dialer.Dial(Network, p.ln.Addr().String())
	require.NoError(t, err)
	defer c2.Close()
	s2 := (<-acc).(*testConn)
	defer s2.Close()
	require.Same(t, z.peer(), s2.peer(), "the honest conn is not on the forged conn's peer")
	go func() { _, _ = io.Copy(s2, s2) }()
	require.NoError(t, z.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = z.Read(make([]byte, 1))
	require.ErrorIs(t, err, syscall.ECONNRESET, "the unbound conn was not reset")
	require.ErrorContains(t, err, "sent nothing")
	echoes(t, c2, "the honest conn after the reset")
}

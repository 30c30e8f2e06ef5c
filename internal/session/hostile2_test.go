package session

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/engine/memengine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// Attacks of hostile peers on the conn logic, over
// the in-memory engine: the attacker injects frames with a From of its
// own.

// memAttacker is an endpoint the server has never heard of.
const memAttacker = 888_888

// claimConnect injects, from memAttacker, a CONNECT to the pair's
// listener that names the client's worker address.
func claimConnect(t *testing.T, p *memPair, id uint64) {
	t.Helper()
	hello := stream.Hello{ConnID: id, EagerMax: 1 << 20, Window: 1 << 20, Name: p.ln.Addr().String(),
		WorkerAddr: p.client.eng.Address()}
	b, err := hello.MarshalBinary()
	require.NoError(t, err)
	h := stream.Header{Kind: stream.KindConnect, Length: uint32(len(b))}.Bytes()
	p.srvEng.Inject(memAttacker, h[:], b)
}

// serverPeerFrom returns the From the server bound to the client's peer.
func serverPeerFrom(t *testing.T, p *memPair) uintptr {
	p.server.mu.RLock()
	defer p.server.mu.RUnlock()
	pr := p.server.shards[0].peers[string(p.client.eng.Address())]
	require.NotNil(t, pr, "the server has no peer for the client")
	from := pr.from.Load()
	require.NotZero(t, from, "the server has not learnt the client's endpoint: no frame of a client conn reached it yet (exchangeByte)")
	return from
}

// exchangeByte sends a byte from c to s and reads it: the server's conn s
// is then bound to the client's endpoint, whose From its peer knows.
func exchangeByte(t *testing.T, c, s net.Conn) {
	t.Helper()
	_, err := c.Write([]byte{1})
	require.NoError(t, err)
	_, err = io.ReadFull(s, make([]byte, 1))
	require.NoError(t, err)
}

// CONNECTs to an unkeyed listener that
// claim a live peer's worker address made the listener bind that peer to
// the claimer's endpoint; the real peer's answers no longer counted, and
// its idle conn was reset by keepalive after 1.6-1.8 s.
func TestMemClaimedAddressKeepsPeer(t *testing.T) {
	synctest.Test(t, testMemClaimedAddressKeepsPeer)
}

func testMemClaimedAddressKeepsPeer(t *testing.T) {
	p := newMemPair(t, Config{KeepAlive: 300 * time.Millisecond})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	synctest.Wait() // the dialer's first frame for the conn bound the peer
	real := serverPeerFrom(t, p)
	require.NotZero(t, real, "the peer's From was not learnt")
	for i := range 20 {
		claimConnect(t, p, uint64(5000+i))
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // five keepalives, idle
	require.Equal(t, real, serverPeerFrom(t, p), "a CONNECT claiming the peer's address rebound it")
	require.Zero(t, p.client.Stats().KeepAliveFailures+p.server.Stats().KeepAliveFailures)
	_, err := c.Write([]byte("alive"))
	require.NoError(t, err)
	b := make([]byte, 5)
	_, err = io.ReadFull(s, b)
	require.NoError(t, err)
}

// A third endpoint that claimed a
// stopped peer's address, then sent junk for that peer's conns, kept the
// peer "alive": a Read waited out its deadline instead of failing by
// keepalive.
func TestMemClaimedPeerNotKeptAlive(t *testing.T) {
	synctest.Test(t, testMemClaimedPeerNotKeptAlive)
}

func testMemClaimedPeerNotKeptAlive(t *testing.T) {
	p := newMemPair(t, Config{KeepAlive: 300 * time.Millisecond})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	sid := s.(*testConn).id
	// A byte each way first: the server conn is bound to the client's
	// endpoint by a frame that names it (an attacker who knew sid before
	// that could bind it to itself, which is not what this test is about).
	_, err := c.Write([]byte{1})
	require.NoError(t, err)
	_, err = io.ReadFull(s, make([]byte, 1))
	require.NoError(t, err)
	// The client stops: nothing it sends arrives any more.
	cli := string(p.cEng.Address())
	p.net.SetHook(func(f *memengine.Frame) memengine.Action {
		if f.From == cli {
			return memengine.Drop
		}
		return memengine.Deliver
	})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := uint64(0); ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(30 * time.Millisecond):
			}
			claimConnect(t, p, 6000+i)
			for _, k := range []stream.Kind{stream.KindPing, stream.KindWindow} {
				h := stream.Header{Kind: k, ConnID: sid, Aux: 1}.Bytes()
				p.srvEng.Inject(memAttacker, h[:], nil)
			}
		}
	}()
	defer func() { close(stop); <-done }()
	require.NoError(t, s.SetReadDeadline(time.Now().Add(15*time.Second)))
	_, err = s.Read(make([]byte, 1))
	require.True(t, errors.Is(err, syscall.ECONNRESET), "the stopped peer was kept alive: %v", err)
	require.ErrorContains(t, err, "keepalive")
}

// PINGs were answered 1:1, without limit, so a
// peer could make the engine (and the wire) answer a flood. Now a peer's
// PINGs are answered within a budget; the rest are dropped and counted,
// and the peer's keepalive still works.
func TestMemPingFloodBounded(t *testing.T) {
	synctest.Test(t, testMemPingFloodBounded)
}

func testMemPingFloodBounded(t *testing.T) {
	p := newMemPair(t, Config{KeepAlive: 300 * time.Millisecond})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	srv := string(p.srvEng.Address())
	var pongs atomic.Int64
	p.net.SetHook(func(f *memengine.Frame) memengine.Action {
		if h, err := stream.DecodeHeader(f.Header); err == nil && f.From == srv && h.Kind == stream.KindPing && h.Flags&stream.FlagReply != 0 {
			pongs.Add(1)
		}
		return memengine.Deliver
	})
	exchangeByte(t, c, s)
	from := serverPeerFrom(t, p) // as if the client sent them
	sid := s.(*testConn).id
	const flood = 2000
	start := time.Now()
	for i := range flood {
		h := stream.Header{Kind: stream.KindPing, ConnID: sid, Aux: uint64(i + 1)}.Bytes()
		p.srvEng.Inject(from, h[:], nil)
	}
	stray := stream.Header{Kind: stream.KindPing, ConnID: 0xdead, Aux: 0xbeef}.Bytes()
	for range flood {
		p.srvEng.Inject(from, stray[:], nil)
	}
	time.Sleep(200 * time.Millisecond)
	elapsed := time.Since(start).Seconds()
	limit := int64(2*20 + int(2*20*elapsed) + 10) // twice the budget (pongBurst, pongRate), and keepalive's own answers
	t.Logf("%d PINGs in %.2f s: %d answered (limit %d)", 2*flood, elapsed, pongs.Load(), limit)
	require.LessOrEqual(t, pongs.Load(), limit, "PINGs answered without a bound")
	time.Sleep(time.Second) // keepalive keeps working past the flood
	require.Zero(t, p.client.Stats().KeepAliveFailures+p.server.Stats().KeepAliveFailures)
	_, err := c.Write([]byte("alive"))
	require.NoError(t, err)
	_, err = io.ReadFull(s, make([]byte, 5))
	require.NoError(t, err)
}

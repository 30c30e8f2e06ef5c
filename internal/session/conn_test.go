package session

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/nettest"

	"github.com/ucxnet/ucxnet/internal/engine/memengine"
	"github.com/ucxnet/ucxnet/internal/stream"
	"github.com/ucxnet/ucxnet/registry"
)

// pair is two transports sharing an in-process registry, so both ends of a
// conn run in this process over real UCX transports.
type pair struct {
	server, client *Transport
	ln             net.Listener
	dialer         *Dialer
	// newT starts another transport of the pair's kind (the caller
	// closes it).
	newT func(Config) *Transport
}

// newPair starts a pair of transports with cfg and a listener on the
// server; in a build without UCX it skips t unless cfg forces the kernel-TCP
// lane.
func newPair(t testing.TB, cfg Config) *pair {
	t.Helper()
	if cfg.Lane != LaneTCP {
		needUCX(t)
	}
	return newPairOf(t, cfg, func(cfg Config) *Transport {
		tr, err := newUCXTransport(cfg)
		require.NoError(t, err)
		return tr
	})
}

// newPairOf is newPair with transports that newT starts.
func newPairOf(t testing.TB, cfg Config, newT func(Config) *Transport) *pair {
	t.Helper()
	if cfg.Registry == nil {
		cfg.Registry = registry.NewMemory()
	}
	s, c := newT(cfg), newT(cfg)
	lc := ListenConfig{Transport: s}
	ln, err := lc.Listen(t.Context(), "")
	require.NoError(t, err)
	p := &pair{server: s, client: c, ln: ln, dialer: &Dialer{Transport: c, Timeout: 10 * time.Second}, newT: newT}
	t.Cleanup(func() {
		ln.Close()
		c.Close()
		s.Close()
	})
	return p
}

// forEachEngine runs f as two subtests over pairs with cfg: "mem", over
// the in-memory engine (internal/engine/memengine), which runs in every
// build, and "ucx", over UCX, which skips (saying why) in a build without
// it (unless cfg forces the kernel-TCP lane). One conn-level test, both
// engines. The mem pair's transports run as many workers as the UCX
// pair's (UCXNET_WORKERS, two in these tests).
func forEachEngine(t *testing.T, cfg Config, f func(t *testing.T, p *pair)) {
	t.Run("mem", func(t *testing.T) {
		n := memengine.NewNetwork()
		mcfg := cfg
		if mcfg.StatsDir == "" {
			mcfg.StatsDir = StatsOff
		}
		if mcfg.Lane == LaneUCX {
			// The engine's own lane: a forced UCX lane would refuse the
			// in-memory engine's addresses (no UCX worker's), and its
			// listeners publish no TCP endpoint unless a lane is forced.
			mcfg.Lane = ""
		}
		f(t, newPairOf(t, mcfg, func(cfg Config) *Transport {
			tr, _ := newMemTransport(t, n, cfg)
			return tr
		}))
	})
	t.Run("ucx", func(t *testing.T) { f(t, newPair(t, cfg)) })
}

func (p *pair) conns(t testing.TB) (client, server net.Conn) {
	t.Helper()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := p.ln.Accept()
		ch <- res{c, err}
	}()
	client, err := p.dialer.Dial(Network, p.ln.Addr().String())
	require.NoError(t, err)
	r := <-ch
	require.NoError(t, r.err)
	return client, r.c
}

// requirePromptRefusal checks that a dial was refused for a cause found at
// once (no listener, a dead peer, a refusal), not given up on: a
// *net.OpError matching ECONNREFUSED that is no timeout, and not the
// refusal of a dial that waited for an answer (twice KeepAlive). It
// asserts the cause rather than the time taken, which a loaded machine
// stretches.
func requirePromptRefusal(t *testing.T, err error) {
	t.Helper()
	require.True(t, errors.Is(err, syscall.ECONNREFUSED), "%v", err)
	var op *net.OpError
	require.ErrorAs(t, err, &op)
	require.False(t, op.Timeout(), "a timeout, not a refusal: %v", err)
	require.NotContains(t, err.Error(), "no answer", "the dial waited for an answer that never came")
}

// TestNetTest runs x/net/nettest's conformance suite over both engines.
func TestNetTest(t *testing.T) {
	forEachEngine(t, Config{Window: 256 << 10}, runNetTest)
}

// runNetTest runs x/net/nettest's conformance suite over conns of p.
func runNetTest(t *testing.T, p *pair) {
	var mu sync.Mutex
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		mu.Lock()
		defer mu.Unlock()
		c1, c2 = p.conns(t)
		return c1, c2, func() { c1.Close(); c2.Close() }, nil
	})
}

// Large writes go out straight from the writer's memory over shared memory;
// small ones, CopyWrites ones and those over TCP and RDMA are copied; either way the
// writer may overwrite its buffer the moment Write returns, including
// writes that the receive window cut into parts.
func TestZeroCopyWrites(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      Config
		zeroCopy bool
	}{
		{"default", Config{Window: 256 << 10}, true},
		{"copy", Config{Window: 256 << 10, CopyWrites: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, tc.cfg)
			c, s := p.conns(t)
			defer c.Close()
			defer s.Close()
			want := sha256.New()
			got := make(chan []byte, 1)
			go func() {
				h := sha256.New()
				io.Copy(h, s)
				got <- h.Sum(nil)
			}()
			buf := make([]byte, 1<<20)
			for i, n := range []int{100 << 10, 1 << 20, 16 << 10, 3000, 64 << 10, 1 << 20, 16<<10 - 1} {
				for j := range buf[:n] {
					buf[j] = byte(i*7 + j*13 + j>>9)
				}
				want.Write(buf[:n])
				m, err := c.Write(buf[:n])
				require.NoError(t, err)
				require.Equal(t, n, m)
				clear(buf[:n]) // free to reuse at once
			}
			require.NoError(t, c.(*testConn).CloseWrite())
			require.Equal(t, want.Sum(nil), <-got)
			zc := p.client.Stats().ZeroCopyFrames
			tl := c.(*testConn).Transports()
			t.Logf("transports %v: %d zero-copy frames", tl, zc)
			if tc.zeroCopy && onlyTransports(tl, "posix", "sysv", "cma", "self") {
				require.NotZero(t, zc)
			} else {
				require.Zero(t, zc)
			}
		})
	}
}

// A peer whose process is stopped (here: its progress engine is held)
// neither drains the transport nor fails. A zero-copy Write to it must not
// outlive its deadline for good: zeroCopyGrace after the deadline the peer
// is taken for hung, its endpoint force-closed (so UCX never reads the
// writer's buffer again) and the Write fails with ECONNRESET.
func TestZeroCopyStalledPeer(t *testing.T) {
	// This test is about the zero-copy stall check, not keepalive: it is
	// off here.
	p := newPair(t, Config{Window: 64 << 20, KeepAlive: -1})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	if !c.(*testConn).peer().path(p.client).ZeroCopy {
		t.Skipf("transports %v: writes are copied, not sent zero-copy", c.(*testConn).Transports())
	}
	paused, unblock := make(chan struct{}), make(chan struct{})
	go func() {
		// The engine of the server conn's shard: with Config.Workers over
		// 1, another shard's engine does not carry it.
		resume := s.(*testConn).sh.eng.(interface{ Pause() func() }).Pause() // a UCX progress engine
		close(paused)
		<-unblock
		resume()
	}()
	<-paused
	defer close(unblock)

	buf := make([]byte, 48<<20) // more than shared memory FIFOs or socket buffers hold
	const dl = 300 * time.Millisecond
	wdl := time.Now().Add(dl)
	require.NoError(t, c.SetWriteDeadline(wdl))
	n, err := c.Write(buf)
	end := time.Now()
	t.Logf("Write returned n=%d %v after the deadline: %v", n, end.Sub(wdl), err)
	require.Error(t, err)
	require.Less(t, n, len(buf))
	// Not before the grace after the deadline (measured from the deadline
	// itself: from a clock read after setting it, the Write may end a
	// fraction of a millisecond short of dl+zeroCopyGrace).
	require.False(t, end.Before(wdl.Add(zeroCopyGrace)), "Write ended %v after the deadline, before the %v grace", end.Sub(wdl), zeroCopyGrace)
	require.True(t, errors.Is(err, syscall.ECONNRESET), "%v", err)
	require.Equal(t, uint64(1), p.client.Stats().StalledPeers)
	_, err = c.Write([]byte("more"))
	require.True(t, errors.Is(err, syscall.ECONNRESET), "%v", err)
}

// Peers with different segment sizes — an older ucxnet with UCX's default
// segments, or a user's UCX_*_SEG_SIZE on one side — exchange large writes
// both ways: each side cuts frames to what the other's segments hold (a
// larger frame would make UCX 1.13 abort the receiving process).
func TestMixedSegmentSizes(t *testing.T) {
	needUCX(t)
	small := Config{Registry: registry.NewMemory(), UCX: map[string]string{"MM_SEG_SIZE": "8256", "RX_SEG_SIZE": "64k"}}
	s, err := newUCXTransport(small)
	require.NoError(t, err)
	defer s.Close()
	c, err := newUCXTransport(Config{Registry: small.Registry})
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, 8000, s.shmFrame)
	require.Equal(t, 63<<10, s.tcpFrame)
	lc := ListenConfig{Transport: s}
	ln, err := lc.Listen(t.Context(), "")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		sc, err := ln.Accept()
		if err == nil {
			io.Copy(sc, sc)
			sc.Close()
		}
	}()
	d := Dialer{Transport: c}
	conn, err := d.Dial(Network, ln.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	msg := make([]byte, 3<<20)
	rand.Read(msg)
	go conn.Write(msg)
	got := make([]byte, len(msg))
	_, err = io.ReadFull(conn, got)
	require.NoError(t, err)
	require.True(t, bytes.Equal(msg, got))
	cc := conn.(*testConn)
	t.Logf("transports %v; frames to the small-segment side at most %d (shm) / %d (tcp) bytes", cc.Transports(), cc.peerSegs.Shm, cc.peerSegs.TCP)
	require.Equal(t, SegLimits{Shm: 8000, TCP: 63 << 10}, cc.peerSegs)
	require.Equal(t, SegLimits{Shm: 8000, TCP: 63 << 10}, PeerSegLimits(stream.Hello{}), "an older peer has UCX's default segments")
}

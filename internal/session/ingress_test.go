package session

// The ingress budget (ingress.go): a peer flooding frames that carry no
// stream data is failed, its endpoint closed and its CONNECTs dropped for
// a while; honest peers, heavy ones included, are never charged enough.

import (
	"errors"
	"io"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/stream"
)

func TestMemIngressBudget(t *testing.T) {
	synctest.Test(t, testMemIngressBudget)
}

func testMemIngressBudget(t *testing.T) {
	p := newMemPair(t, Config{})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	honest, _ := newMemTransport(t, p.net, Config{Registry: p.server.cfg.Registry, StatsDir: StatsOff})
	defer honest.Close()
	hd := Dialer{Transport: honest, Timeout: 10 * time.Second}
	hc, err := hd.Dial(Network, p.ln.Addr().String())
	require.NoError(t, err)
	defer hc.Close()
	hs, err := p.ln.Accept()
	require.NoError(t, err)
	defer hs.Close()

	exchangeByte(t, c, s)
	from := serverPeerFrom(t, p)
	sid := s.(*testConn).id
	ping := stream.Header{Kind: stream.KindPing, ConnID: sid, Aux: 1}.Bytes()
	stray := stream.Header{Kind: stream.KindPing, ConnID: 0xdead}.Bytes()
	for i := range ingressBurst + 100 {
		f := ping
		if i%2 == 1 {
			f = stray
		}
		p.srvEng.Inject(from, f[:], nil)
	}
	synctest.Wait()
	require.EqualValues(t, 1, p.server.Stats().PeersFlooded)
	_, err = s.Read(make([]byte, 1))
	require.True(t, errors.Is(err, syscall.ECONNRESET), "the flooder's conn: %v", err)

	// Its CONNECTs are dropped for a while; another peer's conn is fine.
	dropped := p.server.Stats().ConnectsDropped
	_, err = (&Dialer{Transport: p.client, Timeout: 2 * time.Second}).Dial(Network, p.ln.Addr().String())
	require.Error(t, err)
	require.Greater(t, p.server.Stats().ConnectsDropped, dropped)
	_, err = hc.Write([]byte("still here"))
	require.NoError(t, err)
	got := make([]byte, 10)
	_, err = io.ReadFull(hs, got)
	require.NoError(t, err)
	require.Equal(t, "still here", string(got))

	// Data in flight to a conn that closed is no flood: DATA and FIN for
	// a conn the honest peer's side no longer knows cost nothing.
	hfrom := func() uintptr {
		p.server.mu.RLock()
		defer p.server.mu.RUnlock()
		for _, sh := range p.server.shards {
			for _, pr := range sh.peers {
				if pr.addr != string(p.client.eng.Address()) && pr.from.Load() != 0 {
					return pr.from.Load()
				}
			}
		}
		t.Fatal("the server has no peer for the honest transport")
		return 0
	}()
	data := stream.Header{Kind: stream.KindData, ConnID: 0xbeef, Length: 1}.Bytes()
	for range 2 * ingressBurst {
		p.srvEng.Inject(hfrom, data[:], []byte{1})
	}
	synctest.Wait()
	require.EqualValues(t, 1, p.server.Stats().PeersFlooded, "stray data counted as a flood")

	// After floodedFor it may dial again.
	time.Sleep(floodedFor)
	c2, err := (&Dialer{Transport: p.client, Timeout: 10 * time.Second}).Dial(Network, p.ln.Addr().String())
	require.NoError(t, err)
	c2.Close()
}

// An honest peer with many conns, tiny windows and keepalive on, moving
// data as fast as it can, is never failed for flooding.
func TestIngressHonestHeavyPeer(t *testing.T) {
	forEachEngine(t, Config{Window: 4 << 10, KeepAlive: 200 * time.Millisecond}, func(t *testing.T, p *pair) {
		const conns, bytes = 8, 2 << 20
		var wg sync.WaitGroup
		for range conns {
			c, s := p.conns(t)
			wg.Add(2)
			go func() {
				defer wg.Done()
				defer c.Close()
				_, err := c.Write(make([]byte, bytes))
				require.NoError(t, err)
			}()
			go func() {
				defer wg.Done()
				defer s.Close()
				buf := make([]byte, 512) // small reads: a WINDOW per KiB
				n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{s}, buf)
				require.NoError(t, err)
				require.EqualValues(t, bytes, n)
			}()
		}
		wg.Wait()
		require.Zero(t, p.server.Stats().PeersFlooded+p.client.Stats().PeersFlooded)
	})
}

// TestIngressFlood: a raw UCX peer with a conn floods PINGs, stray frames
// and WINDOWs that grant nothing while an honest pair's round trips are
// timed. The flooder is failed, and every honest round trip completes;
// the ratio of the honest p50 under the flood to its quiet value is
// logged (it is not a pass/fail figure).
func TestIngressFlood(t *testing.T) {
	needUCX(t)
	p := newPair(t, Config{})
	c := echoConn(t, p)
	quiet := roundTrips(t, c, 200)

	r := newRawPeer(t, p.server)
	id := r.connect(t, p.ln.Addr().String(), 7, 1<<20)
	fc, err := p.ln.Accept()
	require.NoError(t, err)
	defer fc.Close()
	var stop atomic.Bool
	var sent atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		frames := [][]byte{
			hdrBytes(stream.Header{Kind: stream.KindPing, ConnID: id, Aux: 1}),
			hdrBytes(stream.Header{Kind: stream.KindPing, ConnID: 0xdead}),
			hdrBytes(stream.Header{Kind: stream.KindWindow, ConnID: id, Aux: 1}),
		}
		for i := 0; !stop.Load(); i++ {
			if r.sendErr(frames[i%len(frames)], nil) != nil {
				return
			}
			sent.Add(1)
		}
	}()
	during := roundTrips(t, c, 200)
	t.Logf("honest round trip p50 %v quiet, %v during the flood (%.1fx), %d frames sent so far",
		quiet, during, float64(during)/float64(quiet), sent.Load())
	require.Eventually(t, func() bool { return p.server.Stats().PeersFlooded > 0 }, 20*time.Second, 10*time.Millisecond,
		"a peer that sent %d frames without data was not failed", sent.Load())
	stop.Store(true)
	<-done
	t.Logf("flooder failed after %d frames", sent.Load())
	require.EqualValues(t, 1, p.server.Stats().PeersFlooded)
	fc.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = fc.Read(make([]byte, 1))
	require.True(t, errors.Is(err, syscall.ECONNRESET), "the flooder's conn: %v", err)
	roundTrips(t, c, 10) // the honest conn carries on
}

func hdrBytes(h stream.Header) []byte {
	b := h.Bytes()
	return b[:]
}

// roundTripsWhile times 64-byte round trips over an echo conn while more
// holds (at least one), and returns their median and how many there were.
func roundTripsWhile(t *testing.T, c net.Conn, more func() bool) (p50 time.Duration, n int) {
	t.Helper()
	buf := make([]byte, 64)
	var ds []time.Duration
	for len(ds) == 0 || more() {
		c.SetDeadline(time.Now().Add(30 * time.Second))
		start := time.Now()
		_, err := c.Write(buf)
		require.NoError(t, err)
		_, err = io.ReadFull(c, buf)
		require.NoError(t, err, "honest round trip %d", len(ds))
		ds = append(ds, time.Since(start))
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2], len(ds)
}

// echoConn returns a conn from p's client to an echo listener of p's
// server.
func echoConn(t *testing.T, p *pair) net.Conn {
	ln, err := (&ListenConfig{Transport: p.server}).Listen(t.Context(), "")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	echoListener(ln)
	c, err := (&Dialer{Transport: p.client, Timeout: 10 * time.Second}).Dial(Network, ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrips times n 64-byte round trips over an echo conn and returns the
// median.
func roundTrips(t *testing.T, c net.Conn, n int) time.Duration {
	t.Helper()
	done := 1
	p50, _ := roundTripsWhile(t, c, func() bool { done++; return done <= n })
	return p50
}

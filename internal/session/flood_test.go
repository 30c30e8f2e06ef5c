package session

import (
	"crypto/rand"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// A CONNECT flood with forged worker addresses.

// forgedAddress returns a copy of addr (a v1 packed worker address: byte
// 0 the header, bytes 1..8 the worker uuid) naming another worker uuid:
// the same transports, reachable, but a worker UCX has not met.
func forgedAddress(t testing.TB, addr []byte) []byte {
	require.Greater(t, len(addr), 9)
	f := append([]byte(nil), addr...)
	_, err := rand.Read(f[1:9])
	require.NoError(t, err)
	return f
}

// rssMiB is this process's resident set in MiB (0 if unknown).
func rssMiB() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return kb >> 10
		}
	}
	return 0
}

// acceptAll accepts every conn of ln and keeps it open (a server waiting
// for requests) until the test ends.
func acceptAll(t *testing.T, ln net.Listener) {
	var mu sync.Mutex
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
}

// honestDial dials the pair's listener once and writes a byte on the conn.
func honestDial(p *pair, timeout time.Duration) error {
	d := Dialer{Transport: p.client, Timeout: timeout}
	c, err := d.Dial(Network, p.ln.Addr().String())
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte{1})
	return err
}

// TestAttackForgedAddressFlood sends thousands of CONNECTs to a listener
// that accepts, each carrying the attacker's worker address with another
// worker uuid. Each made the listener create an endpoint (and over tcp a
// socket) to a worker that does not exist: 21,000 of them took the victim
// to 14,700 endpoints and sockets and 245-386 MiB, and honest dials failed
// during the flood and for 15-20 s after it. Now a sender's endpoint makes
// at most one endpoint from the addresses it names, and endpoints made
// from CONNECTs come from a token bucket: the rest are dropped unanswered.
func TestAttackForgedAddressFlood(t *testing.T) {
	const floods = 3000
	p := newPair(t, Config{})
	acceptAll(t, p.ln)
	require.NoError(t, honestDial(p, 10*time.Second)) // the honest peer exists before the flood
	raw := newRawPeer(t, p.server)
	real := raw.eng.Address()
	peers0, fds0, rss0 := p.server.Stats().Peers, openFDs(t), rssMiB()
	dropped0 := p.server.Stats().ConnectsDropped

	// Honest dials while the flood runs (reported, not asserted: the
	// engine has a flood to get through).
	stop := make(chan struct{})
	var during, duringOK atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			during.Add(1)
			if honestDial(p, 5*time.Second) == nil {
				duringOK.Add(1)
			}
		}
	})
	maxPeers, maxFDs := peers0, fds0
	note := func() {
		maxPeers, maxFDs = max(maxPeers, p.server.Stats().Peers), max(maxFDs, openFDs(t))
	}
	for i := range floods {
		hello := stream.Hello{ConnID: uint64(i + 1), EagerMax: 1 << 20, Window: 1 << 16, Name: p.ln.Addr().String(),
			LocalName: "forged", WorkerAddr: forgedAddress(t, real)}
		b, err := hello.MarshalBinary()
		require.NoError(t, err)
		raw.sendFrame(t, stream.Header{Kind: stream.KindConnect}, b)
		if i%100 == 0 {
			note()
		}
	}
	// Let the victim work through what it received.
	for range 20 {
		time.Sleep(100 * time.Millisecond)
		note()
	}
	close(stop)
	wg.Wait()
	st := p.server.Stats()
	t.Logf("%d forged CONNECTs: peers %d → max %d, fds %d → max %d, RSS %d → %d MiB; dropped %d, refused %d; honest dials during the flood: %d of %d",
		floods, peers0, maxPeers, fds0, maxFDs, rss0, rssMiB(), st.ConnectsDropped-dropped0, st.Refused, duringOK.Load(), during.Load())

	// An honest dial succeeds again soon after the flood.
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = honestDial(p, 5*time.Second); err == nil {
			break
		}
	}
	require.NoError(t, err, "honest dials still fail 30 s after the flood")

	const bound = connectBurst + 16
	require.LessOrEqual(t, maxPeers, peers0+bound, "endpoints made from forged addresses")
	require.LessOrEqual(t, maxFDs, fds0+2*bound, "file descriptors")
	require.Greater(t, st.ConnectsDropped, dropped0, "the dropped CONNECTs are counted")
}

// nopHandler drops whatever its engine reports.
type nopHandler struct{}

func (nopHandler) HandleEvents([]engine.Event) {}

// memWorkers starts n engines on the pair's network that answer nothing,
// and returns their addresses: real workers a CONNECT may name.
func memWorkers(t *testing.T, p *memPair, n int) [][]byte {
	addrs := make([][]byte, n)
	for i := range addrs {
		e, err := p.net.Start(nopHandler{})
		require.NoError(t, err)
		t.Cleanup(func() { e.Close(0) })
		addrs[i] = e.Address()
	}
	return addrs
}

// injectConnect injects a CONNECT to the pair's listener from the endpoint
// from, naming the worker address addr.
func injectConnect(t *testing.T, p *memPair, from uintptr, id uint64, addr []byte) {
	hello := stream.Hello{ConnID: id, EagerMax: 1 << 20, Window: 1 << 16, Name: p.ln.Addr().String(), WorkerAddr: addr}
	b, err := hello.MarshalBinary()
	require.NoError(t, err)
	h := stream.Header{Kind: stream.KindConnect, Length: uint32(len(b))}.Bytes()
	p.srvEng.Inject(from, h[:], b)
}

// One sender, one address: CONNECTs from one endpoint naming 200 other
// workers (real ones, that would answer) made 200 endpoints; now the
// first one does, the rest are dropped unanswered and counted.
func TestMemConnectOneAddressPerSender(t *testing.T) {
	p := newMemPair(t, Config{})
	acceptAll(t, p.ln)
	c, err := p.dialer.Dial(Network, p.ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	base := p.server.Stats()
	const n = 200
	for i, addr := range memWorkers(t, p, n) {
		injectConnect(t, p, memAttacker, uint64(7000+i), addr)
	}
	waitStat(t, p.server, "dropped CONNECTs", func(s Stats) uint64 { return s.ConnectsDropped }, base.ConnectsDropped+n-1)
	st := p.server.Stats()
	require.Equal(t, base.Peers+1, st.Peers, "endpoints made from one sender's CONNECTs")
	// The honest client's CONNECTs still find their peer, and a sender
	// that is a known peer cannot name another worker either.
	c2, err := p.dialer.Dial(Network, p.ln.Addr().String())
	require.NoError(t, err)
	c2.Close()
	injectConnect(t, p, serverPeerFrom(t, p), 9999, memWorkers(t, p, 1)[0])
	waitStat(t, p.server, "dropped CONNECTs", func(s Stats) uint64 { return s.ConnectsDropped }, st.ConnectsDropped+1)
	require.Equal(t, st.Peers, p.server.Stats().Peers)
}

// Many senders: endpoints made from CONNECTs come from a token bucket.
// 600 CONNECTs from 600 endpoints, each naming another worker, made 600
// endpoints; now at most connectBurst and connectRate a second.
func TestMemConnectRateBounded(t *testing.T) {
	synctest.Test(t, testMemConnectRateBounded)
}

func testMemConnectRateBounded(t *testing.T) {
	p := newMemPair(t, Config{})
	acceptAll(t, p.ln)
	const n = 600
	addrs := memWorkers(t, p, n)
	base := p.server.Stats()
	start := time.Now()
	for i, addr := range addrs {
		injectConnect(t, p, uintptr(memAttacker+1+i), uint64(7000+i), addr)
	}
	require.Eventually(t, func() bool {
		s := p.server.Stats()
		return s.Peers-base.Peers+s.ConnectsDropped-base.ConnectsDropped >= n
	}, 10*time.Second, time.Millisecond, "CONNECTs not handled")
	elapsed := time.Since(start)
	st := p.server.Stats()
	made := st.Peers - base.Peers
	t.Logf("%d CONNECTs in %v: %d endpoints made, %d dropped", n, elapsed, made, st.ConnectsDropped-base.ConnectsDropped)
	limit := connectBurst + int(elapsed.Seconds()*connectRate) + 1
	require.LessOrEqual(t, int(made), limit, "endpoints made from CONNECTs")
	if limit < n {
		require.Greater(t, st.ConnectsDropped, base.ConnectsDropped)
	}
	// The honest dialer, a new peer, gets in once the bucket refills.
	require.Eventually(t, func() bool {
		d := Dialer{Transport: p.client, Timeout: 2 * time.Second}
		c, err := d.Dial(Network, p.ln.Addr().String())
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 30*time.Second, 10*time.Millisecond, "honest dial after the flood")
}

// The token bucket: connectBurst at once, then connectRate a second.
func TestMemConnectBucket(t *testing.T) {
	var b Bucket
	now := time.Unix(1000, 0)
	for i := range connectBurst {
		require.True(t, b.Take(now, connectBurst, connectRate), "token %d", i)
	}
	require.False(t, b.Take(now, connectBurst, connectRate))
	now = now.Add(time.Second / 4)
	for i := range connectRate / 4 {
		require.True(t, b.Take(now, connectBurst, connectRate), "refilled token %d", i)
	}
	require.False(t, b.Take(now, connectBurst, connectRate))
	now = now.Add(time.Hour)
	for range connectBurst {
		require.True(t, b.Take(now, connectBurst, connectRate))
	}
	require.False(t, b.Take(now, connectBurst, connectRate), "the bucket holds at most connectBurst")
}

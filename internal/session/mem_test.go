package session

// Conn behaviour over the in-memory engine (internal/engine/memengine): no
// UCX, so these tests (TestMem*) also run in a build without cgo, and they
// can make the network drop, duplicate, reorder and inject frames on
// demand. The conn-level tests that need none of that run over both
// engines instead (forEachEngine).

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/deadline"
	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/engine/memengine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// memPair is a pair over one in-memory network.
type memPair struct {
	*pair
	net          *memengine.Network
	srvEng, cEng *memengine.Engine
}

// newMemTransport starts a transport on in-memory engines of n (one unless
// cfg.Workers says more), and returns the first.
func newMemTransport(t testing.TB, n *memengine.Network, cfg Config) (*Transport, *memengine.Engine) {
	t.Helper()
	var me *memengine.Engine
	b := testUCX
	b.Start = func(_ Config, h engine.Handler) (engine.Engine, error) {
		e, err := n.Start(h)
		if me == nil {
			me = e // the first: the one whose address is published
		}
		return e, err
	}
	tr, err := NewTransport(cfg, b)
	require.NoError(t, err)
	return tr, me
}

// newMemPair starts a pair over a new in-memory network. Its transports
// serve no stats socket unless cfg names a directory: with none, they
// start no goroutine that waits on a file descriptor, so a test can run
// them in a synctest bubble. They run one worker unless cfg says more:
// the tests steer that engine (busy, killed, frames injected into it).
func newMemPair(t testing.TB, cfg Config) *memPair {
	t.Helper()
	if cfg.Workers == 0 {
		cfg.Workers = 1
	}
	if cfg.StatsDir == "" {
		cfg.StatsDir = StatsOff
	}
	mp := &memPair{net: memengine.NewNetwork()}
	var engs []*memengine.Engine
	mp.pair = newPairOf(t, cfg, func(cfg Config) *Transport {
		tr, e := newMemTransport(t, mp.net, cfg)
		engs = append(engs, e)
		return tr
	})
	mp.srvEng, mp.cEng = engs[0], engs[1]
	return mp
}

func TestMemPSK(t *testing.T) {
	p := newMemPair(t, Config{})
	key := []byte("correct horse battery staple")
	ln := pskListener(t, p.pair, key)
	d := Dialer{Transport: p.client, PSK: key, Timeout: 5 * time.Second}
	c, err := d.Dial(Network, ln.Addr().String())
	require.NoError(t, err)
	c.Close()
	d.PSK = []byte("another key, also long enough")
	_, err = d.Dial(Network, ln.Addr().String())
	require.True(t, errors.Is(err, syscall.ECONNREFUSED), "%v", err)
}

// A dialer that has not proved it holds the PSK cannot make its endpoint
// stand for another worker's peer by claiming that worker's address in
// its CONNECT: frames from it would otherwise count as the real peer's
// signs of life (strayFrame), keeping a dead peer looking alive.
func TestMemPSKUnprovenDialerKeepsPeerFrom(t *testing.T) {
	p := newMemPair(t, Config{})
	key := []byte("correct horse battery staple")
	ln := pskListener(t, p.pair, key)
	d := Dialer{Transport: p.client, PSK: key, Timeout: 5 * time.Second}
	c, err := d.Dial(Network, ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	from := func() (from uintptr, byFrom *peer, pr *peer) {
		p.server.mu.RLock()
		defer p.server.mu.RUnlock()
		pr = p.server.shards[0].peers[string(p.client.eng.Address())]
		require.NotNil(t, pr, "the server has no peer for the client")
		return pr.from.Load(), p.server.shards[0].peersByFrom[pr.from.Load()], pr
	}
	real, byFrom, pr := from()
	require.NotZero(t, real, "the authenticated conn's From was not noted")
	require.Same(t, pr, byFrom)

	const attacker = 777_777 // an endpoint the server has never heard of
	hello := stream.Hello{ConnID: 4242, EagerMax: 1 << 20, Window: 1 << 20, Name: ln.Addr().String(),
		WorkerAddr: p.client.eng.Address(), Nonce: randomChallenge()}
	b, err := hello.MarshalBinary()
	require.NoError(t, err)
	h := stream.Header{Kind: stream.KindConnect, Length: uint32(len(b))}.Bytes()
	refused := p.server.Stats().Refused
	p.srvEng.Inject(attacker, h[:], b)
	// The server refuses it: it names a peer whose frames come from
	// another endpoint (errClaimedAddr).
	waitStat(t, p.server, "the forged CONNECT refused", func(st Stats) uint64 { return st.Refused }, refused+1)
	now, _, _ := from()
	require.Equal(t, real, now, "an unauthenticated CONNECT replaced the peer's From")
	p.server.mu.RLock()
	require.Nil(t, p.server.shards[0].peersByFrom[attacker], "the forged endpoint stands for a peer")
	p.server.mu.RUnlock()
}

// A network that duplicates every third frame and delivers others out of
// order still yields the exact stream, with duplicates counted.
func TestMemDuplicateAndReorder(t *testing.T) {
	p := newMemPair(t, Config{FrameSize: 1000})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	var n atomic.Int64
	p.net.SetHook(func(f *memengine.Frame) memengine.Action {
		h, err := stream.DecodeHeader(f.Header)
		if err != nil || h.Kind != stream.KindData {
			return memengine.Deliver
		}
		switch n.Add(1) % 6 {
		case 0:
			return memengine.Duplicate
		case 2, 4:
			return memengine.HoldBack
		}
		return memengine.Deliver
	})
	msg := make([]byte, 100_000)
	rand.Read(msg)
	go func() {
		for off := 0; off < len(msg); off += 7000 {
			c.Write(msg[off:min(off+7000, len(msg))])
			p.net.ReleaseHeld() // the held frames arrive late, newest first
		}
		c.(*testConn).CloseWrite()
	}()
	got, err := io.ReadAll(s)
	require.NoError(t, err)
	require.True(t, bytes.Equal(msg, got), "stream corrupted by duplicates or reordering")
	require.Positive(t, p.server.Stats().Duplicates)
}

// A frame injected from an endpoint the conn was not made with is dropped.
func TestMemInjection(t *testing.T) {
	p := newMemPair(t, Config{})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	id := c.(*testConn).id
	for seq := range 3 {
		h := stream.Header{Kind: stream.KindData, ConnID: id, Seq: uint64(seq), Length: 5}.Bytes()
		p.cEng.Inject(999_999, h[:], []byte("EVIL!"))
	}
	rst := stream.Header{Kind: stream.KindRst, ConnID: id}.Bytes()
	p.cEng.Inject(999_999, rst[:], nil)
	waitStat(t, p.client, "foreign frames", func(st Stats) uint64 { return st.ForeignFrames }, 4)
	go s.Write([]byte("good"))
	buf := make([]byte, 4)
	_, err := io.ReadFull(c, buf)
	require.NoError(t, err)
	require.Equal(t, "good", string(buf))
}

// The listener's DATA overtakes its ACCEPT (UCX does not order active
// messages): the dialer keeps it and delivers it once the ACCEPT arrives.
func TestMemDataBeforeAccept(t *testing.T) {
	p := newMemPair(t, Config{})
	var held atomic.Bool
	p.net.SetHook(func(f *memengine.Frame) memengine.Action {
		h, err := stream.DecodeHeader(f.Header)
		if err == nil && h.Kind == stream.KindAccept && held.CompareAndSwap(false, true) {
			return memengine.HoldBack
		}
		return memengine.Deliver
	})
	type res struct {
		c   net.Conn
		err error
	}
	dialed := make(chan res, 1)
	go func() {
		c, err := p.dialer.Dial(Network, p.ln.Addr().String())
		dialed <- res{c, err}
	}()
	s, err := p.ln.Accept()
	require.NoError(t, err)
	defer s.Close()
	// Accept can return before the listener's engine has sent the ACCEPT:
	// write only once it is held, or it would be held after the release.
	require.Eventually(t, held.Load, 10*time.Second, time.Millisecond, "the ACCEPT was never sent")
	_, err = s.Write([]byte("early"))
	require.NoError(t, err)
	p.net.ReleaseHeld()
	r := <-dialed
	require.NoError(t, r.err)
	defer r.c.Close()
	buf := make([]byte, 5)
	_, err = io.ReadFull(r.c, buf)
	require.NoError(t, err)
	require.Equal(t, "early", string(buf))
}

// A peer that vanishes (its engine killed) fails blocked Reads with
// ECONNRESET.
func TestMemPeerKilled(t *testing.T) {
	p := newMemPair(t, Config{})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		errc <- err
	}()
	p.srvEng.Kill()
	select {
	case err := <-errc:
		require.True(t, errors.Is(err, syscall.ECONNRESET), "%v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Read on a killed peer did not fail")
	}
}

// A peer that goes silent without its endpoint failing (a frozen process,
// a zombie over shared memory) is taken for dead by the keepalive.
func TestMemKeepAliveSilentPeer(t *testing.T) {
	synctest.Test(t, testMemKeepAliveSilentPeer)
}

func testMemKeepAliveSilentPeer(t *testing.T) {
	p := newMemPair(t, Config{KeepAlive: 600 * time.Millisecond})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	// An idle, live peer is not taken for dead: PINGs keep it alive.
	time.Sleep(2 * time.Second)
	_, err := c.Write([]byte("x"))
	require.NoError(t, err)
	require.Positive(t, p.client.Stats().PingsSent+p.server.Stats().PingsSent)
	// Now everything the server sends is lost.
	srv := string(p.srvEng.Address())
	p.net.SetHook(func(f *memengine.Frame) memengine.Action {
		if f.From == srv {
			return memengine.Drop
		}
		return memengine.Deliver
	})
	_, err = c.Read(make([]byte, 1))
	require.True(t, errors.Is(err, syscall.ECONNRESET), "%v", err)
	require.ErrorContains(t, err, "keepalive")
	require.Positive(t, p.client.Stats().KeepAliveFailures)
}

// A keepalive probe, or its answer, that arrives for a conn the receiver
// no longer knows (it crossed the conn's close) still counts: a live peer
// is not taken for dead. Here every PING is addressed to an unknown conn.
func TestMemKeepAliveStrayPings(t *testing.T) {
	synctest.Test(t, testMemKeepAliveStrayPings)
}

func testMemKeepAliveStrayPings(t *testing.T) {
	p := newMemPair(t, Config{KeepAlive: 300 * time.Millisecond})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	var strays atomic.Int64
	p.net.SetHook(func(f *memengine.Frame) memengine.Action {
		h, err := stream.DecodeHeader(f.Header)
		if err != nil || h.Kind != stream.KindPing {
			return memengine.Deliver
		}
		h.ConnID = 0xdead0000beef // known to neither side
		b := h.Bytes()
		f.Header = b[:]
		strays.Add(1)
		return memengine.Deliver
	})
	time.Sleep(1500 * time.Millisecond) // five keepalives of silence but for PINGs
	require.Positive(t, strays.Load(), "no PING was sent")
	require.Zero(t, p.client.Stats().KeepAliveFailures+p.server.Stats().KeepAliveFailures)
	require.Positive(t, p.client.Stats().UnknownConn, "the answers did not arrive as strays")
	_, err := c.Write([]byte("alive"))
	require.NoError(t, err)
	b := make([]byte, 5)
	_, err = io.ReadFull(s, b)
	require.NoError(t, err)
	require.Equal(t, "alive", string(b))
}

// A dial that gets no answer at all fails with ECONNREFUSED after
// KeepAlive, not after the whole dial timeout.
func TestMemDialNoAnswer(t *testing.T) {
	synctest.Test(t, testMemDialNoAnswer)
}

func testMemDialNoAnswer(t *testing.T) {
	p := newMemPair(t, Config{KeepAlive: 300 * time.Millisecond})
	p.net.SetHook(func(f *memengine.Frame) memengine.Action {
		if h, err := stream.DecodeHeader(f.Header); err == nil && h.Kind == stream.KindConnect {
			return memengine.Drop
		}
		return memengine.Deliver
	})
	_, err := p.dialer.Dial(Network, p.ln.Addr().String())
	require.True(t, errors.Is(err, syscall.ECONNREFUSED), "%v", err)
	require.ErrorContains(t, err, "no answer")
}

// A configured window above stream.MaxWindow is clamped, not sent in a
// Hello that the peer would refuse as malformed.
func TestMemWindowClamped(t *testing.T) {
	p := newMemPair(t, Config{Window: 1 << 30})
	require.Equal(t, stream.MaxWindow, p.client.cfg.Window)
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	go c.Write([]byte("fits"))
	buf := make([]byte, 4)
	_, err := io.ReadFull(s, buf)
	require.NoError(t, err)
}

// A sweep that runs late because this process was not running (stopped, a
// suspended VM) fails no peer for the silence it missed: it probes them.
func TestMemKeepAliveAfterOwnStall(t *testing.T) {
	p := newMemPair(t, Config{KeepAlive: 2 * time.Second})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	late := time.Now().Add(5 * time.Second)
	sh := p.client.shards[0]
	asEngine(sh, func() { sh.sweep.once(late, true) })
	require.Zero(t, p.client.Stats().KeepAliveFailures, "a peer was failed for our own stall")
	require.Positive(t, p.client.Stats().PingsSent)
	// Without the stall the same silence is fatal.
	asEngine(sh, func() { sh.sweep.once(late.Add(keepAliveOf(2*time.Second).Timeout()+time.Second), false) })
	require.Positive(t, p.client.Stats().KeepAliveFailures)
}

// A dialer asking for tiny frames (which would turn every write to it into
// a storm of calls into the engine) is refused with RefuseBadHello.
func TestMemTinyFramesRefused(t *testing.T) {
	p := newMemPair(t, Config{})
	r := newRecorderEngine(t, p.net)
	w := r.e.Acquire(true)
	defer w.GiveBack()
	ep, err := w.Connect(p.srvEng.Address())
	require.NoError(t, err)
	hello := stream.Hello{ConnID: 9, EagerMax: 1, Window: 1 << 16, Name: p.ln.Addr().String(), WorkerAddr: r.e.Address()}
	b, err := hello.MarshalBinary()
	require.NoError(t, err)
	hb := stream.Header{Kind: stream.KindConnect, Length: uint32(len(b))}.Bytes()
	_, _, err = w.Send(ep, engine.Frames{Header: hb[:], Data: b})
	require.NoError(t, err)
	h := r.next(t)
	require.Equal(t, stream.KindRefuse, h.Kind)
	require.Equal(t, uint64(stream.RefuseBadHello), h.Aux)
}

// recorderEngine is a bare in-memory engine whose frames a test reads: a
// hand-made peer.
type recorderEngine struct {
	e      *memengine.Engine
	frames chan stream.Header
}

func newRecorderEngine(t *testing.T, n *memengine.Network) *recorderEngine {
	r := &recorderEngine{frames: make(chan stream.Header, 64)}
	e, err := n.Start(r)
	require.NoError(t, err)
	r.e = e
	t.Cleanup(func() { e.Close(0) })
	return r
}

func (r *recorderEngine) HandleEvents(evs []engine.Event) {
	for i := range evs {
		if h, err := stream.DecodeHeader(evs[i].Header()); err == nil {
			select {
			case r.frames <- h:
			default:
			}
		}
	}
}

func (r *recorderEngine) next(t *testing.T) stream.Header {
	select {
	case h := <-r.frames:
		return h
	case <-time.After(5 * time.Second):
		t.Fatal("no frame")
		return stream.Header{}
	}
}

// Dialer.KeepAlive replaces the Transport's for the conns it makes, as
// net.Dialer.KeepAlive does: on, with the Transport's off, and off, with
// the Transport's on.
func TestMemDialerKeepAlive(t *testing.T) {
	dropServer := func(p *memPair) {
		srv := string(p.srvEng.Address())
		p.net.SetHook(func(f *memengine.Frame) memengine.Action {
			if f.From == srv {
				return memengine.Drop
			}
			return memengine.Deliver
		})
	}
	t.Run("on", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := newMemPair(t, Config{KeepAlive: -1})
			p.dialer.KeepAlive = 600 * time.Millisecond
			c, s := p.conns(t)
			defer c.Close()
			defer s.Close()
			dropServer(p)
			_, err := c.Read(make([]byte, 1))
			require.True(t, errors.Is(err, syscall.ECONNRESET), "%v", err)
			require.ErrorContains(t, err, "keepalive")
		})
	})
	t.Run("off", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := newMemPair(t, Config{KeepAlive: 300 * time.Millisecond})
			p.dialer.KeepAlive = -1
			c, s := p.conns(t)
			defer c.Close()
			defer s.Close()
			dropServer(p)
			c.SetReadDeadline(time.Now().Add(1500 * time.Millisecond))
			_, err := c.Read(make([]byte, 1))
			require.ErrorIs(t, err, os.ErrDeadlineExceeded, "the conn's keepalive is off: only the deadline ends this Read")
			require.Zero(t, p.client.Stats().KeepAliveFailures)
		})
	})
}

// UCXNET_KEEPALIVE takes a Go duration, and a bare negative number turns
// the keepalive off.
func TestKeepAliveEnv(t *testing.T) {
	for v, want := range map[string]time.Duration{"3s": 3 * time.Second, "-1": -1, "-1s": -time.Second, "junk": DefaultKeepAlive} {
		t.Setenv("UCXNET_KEEPALIVE", v)
		require.Equal(t, want, envDuration("UCXNET_KEEPALIVE", DefaultKeepAlive), "UCXNET_KEEPALIVE=%s", v)
	}
}

// A zero-copy Write outlives its deadline by zeroCopyGrace at most, unless
// the deadline is moved on meanwhile: then the wait goes on for the moved
// deadline, and the peer is not taken for hung. A deadline that passes for
// good ends the wait a grace after it, failing the peer. (The wait is
// driven with a send of its own: the in-memory engine finishes every send
// at once.)
func TestMemZeroCopyGraceDeadlineMoved(t *testing.T) {
	synctest.Test(t, testMemZeroCopyGraceDeadlineMoved)
}

func testMemZeroCopyGraceDeadlineMoved(t *testing.T) {
	p := newMemPair(t, Config{KeepAlive: -1})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	sc := c.(*testConn).Conn
	wait := func(dl *deadline.Deadline) (done, res chan error) {
		done, res = make(chan error, 1), make(chan error, 1)
		go func() { res <- sc.waitZeroCopy(done, dl) }()
		return done, res
	}

	dl := deadline.Make()
	dl.Set(time.Now().Add(time.Second))
	done, res := wait(&dl)
	time.Sleep(time.Second + zeroCopyGrace/2) // the deadline passed, the grace half gone
	synctest.Wait()
	dl.Set(time.Now().Add(time.Hour))
	time.Sleep(zeroCopyGrace) // the grace is over
	synctest.Wait()
	require.Empty(t, res, "the wait ended though the deadline was moved on")
	require.Zero(t, p.client.Stats().StalledPeers)
	done <- nil
	require.NoError(t, <-res)

	dl.Set(time.Now().Add(time.Second))
	done, res = wait(&dl)
	time.Sleep(time.Second + zeroCopyGrace + time.Millisecond)
	synctest.Wait()
	require.Equal(t, uint64(1), p.client.Stats().StalledPeers, "a deadline passed for good did not end the wait")
	done <- ErrReset // the send, canceled by the peer's failure
	require.ErrorIs(t, <-res, ErrReset)
}

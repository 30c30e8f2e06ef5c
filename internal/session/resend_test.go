package session

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/engine/memengine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// onFirst makes p's network do act to the first frame of kind, and
// returns how many frames of kind were sent.
func onFirst(p *memPair, kind stream.Kind, act memengine.Action) *atomic.Int64 {
	var n atomic.Int64
	p.net.SetHook(func(f *memengine.Frame) memengine.Action {
		h, err := stream.DecodeHeader(f.Header)
		if err != nil || h.Kind != kind {
			return memengine.Deliver
		}
		if n.Add(1) == 1 {
			return act
		}
		return memengine.Deliver
	})
	return &n
}

// dialEcho dials ln (an echoing listener) over d and checks one round trip.
func dialEcho(t *testing.T, d *Dialer, ln net.Listener) net.Conn {
	t.Helper()
	c, err := d.Dial(Network, ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	echoes(t, c, "after the handshake")
	return c
}

// echoListener makes ln's conns echo.
func echoListener(ln net.Listener) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
}

// A CONNECT lost below the session (the first one dropped) is sent again:
// the dial succeeds, and the listener has made one conn. Before, the dial
// failed with ECONNREFUSED after twice KeepAlive.
func TestMemConnectLost(t *testing.T) {
	p := newMemPair(t, Config{})
	connects := onFirst(p, stream.KindConnect, memengine.Drop)
	echoListener(p.ln)
	dialEcho(t, p.dialer, p.ln)
	require.GreaterOrEqual(t, connects.Load(), int64(2), "the CONNECT was not sent again")
	require.Equal(t, uint64(1), p.server.Stats().Accepts)
	require.Equal(t, uint64(1), p.server.Stats().OpenConns)
}

// A CONNECT that reaches the listener twice makes one conn; its second
// ACCEPT, if one is sent, is no fault at the dialer.
func TestMemConnectDuplicated(t *testing.T) {
	p := newMemPair(t, Config{})
	onFirst(p, stream.KindConnect, memengine.Duplicate)
	echoListener(p.ln)
	in := p.server.Stats().FramesIn
	dialEcho(t, p.dialer, p.ln)
	// The CONNECT, its copy and the dialer's WINDOW and echoed bytes.
	waitStat(t, p.server, "frames in", func(st Stats) uint64 { return st.FramesIn }, in+3)
	require.Equal(t, uint64(1), p.server.Stats().Accepts)
	require.Equal(t, uint64(1), p.server.Stats().OpenConns)
	require.Zero(t, p.client.Stats().BadFrames)
	require.Zero(t, p.server.Stats().BadFrames)
}

// The ACCEPT is lost: the dialer sends its CONNECT again, and the listener
// answers with the ACCEPT of the conn it made, with a key and without:
// one conn, and one handshake (a second ACCEPT of a keyed listener
// carries the same challenge, so it proves nothing new).
func TestMemAcceptLost(t *testing.T) {
	for _, key := range [][]byte{nil, []byte("correct horse battery staple")} {
		t.Run(map[bool]string{true: "psk", false: "plain"}[key != nil], func(t *testing.T) {
			p := newMemPair(t, Config{})
			ln := p.ln
			if key != nil {
				ln = pskListener(t, p.pair, key)
			} else {
				echoListener(ln)
			}
			accepts := onFirst(p, stream.KindAccept, memengine.Drop)
			d := &Dialer{Transport: p.client, PSK: key, Timeout: 10 * time.Second}
			dialEcho(t, d, ln)
			require.GreaterOrEqual(t, accepts.Load(), int64(2), "the ACCEPT was not sent again")
			require.Equal(t, uint64(1), p.server.Stats().Accepts)
			require.Equal(t, uint64(1), p.server.Stats().OpenConns)
			require.Zero(t, p.server.Stats().AuthFailures)
		})
	}
}

// A CONNECT that names a dialer's conn the listener accepted, with
// another Hello (not its dialer's, which sends the same one each time),
// makes no conn and is answered with nothing.
func TestMemRepeatedConnectOtherHello(t *testing.T) {
	p := newMemPair(t, Config{})
	echoListener(p.ln)
	c := dialEcho(t, p.dialer, p.ln)
	bad := p.server.Stats().BadFrames
	hello := stream.Hello{ConnID: c.(*testConn).id, EagerMax: 1 << 20, Window: 1 << 20, Name: p.ln.Addr().String(),
		WorkerAddr: p.client.eng.Address()}
	b, err := hello.MarshalBinary()
	require.NoError(t, err)
	h := stream.Header{Kind: stream.KindConnect, Length: uint32(len(b))}.Bytes()
	p.srvEng.Inject(memAttacker, h[:], b)
	waitStat(t, p.server, "bad frames", func(st Stats) uint64 { return st.BadFrames }, bad+1)
	require.Equal(t, uint64(1), p.server.Stats().Accepts)
	echoes(t, c, "after the forged repeat")
}

// A dial to a listener that never answers still fails after twice
// KeepAlive, with ECONNREFUSED, having sent its CONNECT more than once.
func TestMemConnectResentUntilGivenUp(t *testing.T) {
	p := newMemPair(t, Config{KeepAlive: 500 * time.Millisecond})
	var connects atomic.Int64
	p.net.SetHook(func(f *memengine.Frame) memengine.Action {
		if h, err := stream.DecodeHeader(f.Header); err == nil && h.Kind == stream.KindConnect {
			connects.Add(1)
			return memengine.Drop
		}
		return memengine.Deliver
	})
	_, err := p.dialer.Dial(Network, p.ln.Addr().String())
	require.True(t, errors.Is(err, syscall.ECONNREFUSED), "%v", err)
	require.ErrorContains(t, err, "no answer")
	require.GreaterOrEqual(t, connects.Load(), int64(2))
	require.Zero(t, p.server.Stats().Accepts)
}

// A keyed listener's handshake is not replayable into a second conn: the
// dialer's CONNECT, replayed byte for byte from elsewhere while its conn
// is open and after it closed, makes no conn and starts no handshake
// (its ACCEPT goes to the dialer's worker, which takes it as a repeat).
func TestMemReplayedConnect(t *testing.T) {
	p := newMemPair(t, Config{})
	key := []byte("correct horse battery staple")
	ln := pskListener(t, p.pair, key)
	var connect atomic.Pointer[[2][]byte]
	p.net.SetHook(func(f *memengine.Frame) memengine.Action {
		if h, err := stream.DecodeHeader(f.Header); err == nil && h.Kind == stream.KindConnect {
			connect.CompareAndSwap(nil, &[2][]byte{append([]byte(nil), f.Header...), append([]byte(nil), f.Data...)})
		}
		return memengine.Deliver
	})
	d := &Dialer{Transport: p.client, PSK: key, Timeout: 10 * time.Second}
	c := dialEcho(t, d, ln)
	replay := func() {
		in := p.server.Stats().FramesIn
		f := connect.Load()
		p.srvEng.Inject(memAttacker, f[0], f[1])
		waitStat(t, p.server, "the replay", func(st Stats) uint64 { return st.FramesIn }, in+1)
	}
	replay()
	echoes(t, c, "after a replay")
	require.NoError(t, c.Close())
	waitNoConns(t, p.server)
	replay()
	// A conn made by the replay would be queued, or wait for a proof;
	// a dial of our own after it shows it was handled.
	dialEcho(t, d, ln)
	require.Equal(t, uint64(2), p.server.Stats().Accepts)
	require.Equal(t, uint64(1), p.server.Stats().OpenConns)
	require.Zero(t, p.server.Stats().AuthFailures)
	require.Zero(t, p.client.Stats().BadFrames)
	// An ACCEPT of a conn made by a replay reaches the dialer's worker,
	// which answers it with an RST; the second dial's came after it.
	require.Zero(t, p.client.Stats().ResetsSent, "a replay made a conn")
}

package session

import (
	"errors"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/cucx"
	"github.com/ucxnet/ucxnet/internal/stream"
	"github.com/ucxnet/ucxnet/internal/ucxconf"
)

// stalledConn connects a UCX worker of its own to ln as a dialer, grants
// the accepted conn an unbounded send window, and then never progresses
// again: a hostile peer that takes what it is sent into nothing. It
// returns the victim's end of the conn.
func stalledConn(t *testing.T, ln net.Listener, victim *Transport, id uint64) net.Conn {
	var settings []cucx.Setting
	for _, s := range ucxconf.Settings(nil, testLib().Version) {
		settings = append(settings, cucx.Setting{Name: s.Name, Value: s.Value})
	}
	w, err := cucx.Open(settings)
	require.NoError(t, err)
	sp := &stalledPeer{w: w}
	addr, err := w.Address()
	require.NoError(t, err)
	sp.ep, err = w.Connect(rawTarget(victim, addr))
	require.NoError(t, err)
	hello := stream.Hello{ConnID: id, EagerMax: 1 << 20, Window: 1 << 16, Name: ln.Addr().String(), WorkerAddr: addr}
	b, err := hello.MarshalBinary()
	require.NoError(t, err)
	hb := stream.Header{Kind: stream.KindConnect, Length: uint32(len(b))}.Bytes()
	_, err = w.Send(sp.ep, hb[:], b)
	require.NoError(t, err)
	var lid uint64
	sp.progress(t, func(evs []cucx.Event) bool {
		for i := range evs {
			h, err := stream.DecodeHeader(evs[i].Header())
			if err == nil && h.Kind == stream.KindAccept && h.ConnID == id {
				var reply stream.Hello
				require.NoError(t, reply.UnmarshalBinary(evs[i].Data))
				lid = reply.ConnID
				return true
			}
		}
		return false
	})
	win := stream.Header{Kind: stream.KindWindow, ConnID: lid, Aux: math.MaxUint64}.Bytes()
	_, err = w.Send(sp.ep, win[:], nil)
	require.NoError(t, err)
	sp.progress(t, func([]cucx.Event) bool { return w.Stats().Inflight == 0 })
	t.Cleanup(func() {
		_ = w.CloseEP(sp.ep, true)
		sp.progress(t, func([]cucx.Event) bool { return w.Stats().Inflight == 0 })
		w.Close()
	})
	c, err := ln.Accept()
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// What UCX may hold in copies of sends
// it could not start was bounded per peer (8 MiB over tcp; over shared
// memory 16 MiB once the process held 64 MiB), not per process: 8 hostile
// peers that grant a window and never drain held 96 MiB over tcp and
// about 147 MiB over sm. Now, once the process holds processBacklog, a
// write to a peer that holds any waits for that peer to drain.
func TestAttackSendBufferingPerProcess(t *testing.T) {
	const peers = 8
	p := newPair(t, Config{KeepAlive: -1, Linger: -1}) // the stalled peers are not to be taken for dead, nor waited for at Close
	conns := make([]net.Conn, peers)
	for i := range conns {
		conns[i] = stalledConn(t, p.ln, p.server, uint64(7100+i))
	}
	var size int
	switch k := conns[0].(*testConn).peer().path(p.server).Kind; k {
	case PathSharedMemory:
		size = 8 << 10 // not small for an 8 KiB frame, not zero-copy: UCX copies it
	case PathTCP:
		size = 64 << 10
	default:
		t.Skipf("the bounds apply over shared memory and tcp; this run's UCX_TLS=%q carries the conns over %v", os.Getenv("UCX_TLS"), conns[0].(*testConn).Transports())
	}
	var wg sync.WaitGroup
	var written atomic.Int64
	var peak atomic.Uint64
	for _, c := range conns {
		wg.Go(func() {
			c.SetWriteDeadline(time.Now().Add(3 * time.Second))
			buf := make([]byte, size)
			for {
				n, err := c.Write(buf)
				written.Add(int64(n))
				if held := p.server.engineStats().Backlog; held > peak.Load() {
					peak.Store(held) // racy max: good enough for a bound
				}
				if err != nil {
					var ne net.Error
					require.True(t, errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.ECONNRESET), "%v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	held := p.server.engineStats().Backlog
	t.Logf("%d peers, %d-byte writes: written %d MiB, UCX holds %.1f MiB (peak %.1f MiB)", peers, size,
		written.Load()>>20, float64(held)/(1<<20), float64(peak.Load())/(1<<20))
	// The bound, plus what each writer had committed when it last passed
	// it (a write each), with room to spare.
	limit := uint64(processBacklog + peers*size + 8<<20)
	require.LessOrEqual(t, max(held, peak.Load()), limit, "UCX held more than the process bound")
}

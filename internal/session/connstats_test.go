package session

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Stats counts what each end sent and received, on both lanes, and the
// addresses of both ends split as host:port with the ends' names.
func TestConnStatsCounts(t *testing.T) {
	for _, lane := range []string{LaneUCX, LaneTCP} {
		t.Run(lane, func(t *testing.T) {
			forEachEngine(t, Config{Lane: lane}, func(t *testing.T, p *pair) {
				c, s := p.conns(t)
				defer c.Close()
				defer s.Close()
				cc, sc := c.(*testConn), s.(*testConn)

				const up, down = 300_000, 1234
				wrote := make(chan error, 1)
				go func() {
					_, err := c.Write(bytes.Repeat([]byte("u"), up))
					wrote <- err
				}()
				_, err := io.ReadFull(s, make([]byte, up))
				require.NoError(t, err)
				// The peer can have every byte before Write returns and
				// counts them (the kernel-TCP lane): wait for it.
				require.NoError(t, <-wrote)
				_, err = s.Write(bytes.Repeat([]byte("d"), down))
				require.NoError(t, err)
				_, err = io.ReadFull(c, make([]byte, down))
				require.NoError(t, err)

				cs, ss := cc.Stats(), sc.Stats()
				require.Equal(t, uint64(up), cs.BytesOut)
				require.Equal(t, uint64(down), cs.BytesIn)
				require.Equal(t, uint64(up), ss.BytesIn)
				require.Equal(t, uint64(down), ss.BytesOut)
				require.Equal(t, lane, cs.Lane)
				require.Equal(t, lane, ss.Lane)
				require.NotEmpty(t, cs.LaneReason)
				require.NotEmpty(t, cs.Transports)
				require.True(t, cs.Dialed)
				require.False(t, ss.Dialed)
				require.Equal(t, ConnOpen, cs.State)
				require.Positive(t, cs.Age)
				if lane == LaneUCX {
					require.Positive(t, ss.FramesIn)
					require.Positive(t, ss.RecvWindow)
					// Every frame sent was received (all bytes were read); the
					// sender counts a frame once UCX took it, which may come
					// just after its arrival.
					require.Eventually(t, func() bool { return cc.Stats().FramesOut == sc.Stats().FramesIn }, 10*time.Second, time.Millisecond)
				} else {
					require.Zero(t, cs.FramesOut)
					require.Positive(t, cs.RTT, "the kernel's estimate")
				}

				// Addresses: "name:id" at both ends, one end's local the other's remote.
				require.Equal(t, c.LocalAddr().String(), s.RemoteAddr().String())
				require.Equal(t, s.LocalAddr().String(), c.RemoteAddr().String())
				require.Equal(t, cs.Local, c.LocalAddr().String())
				require.Equal(t, cs.Remote, ss.Local)
				for _, tc := range []struct {
					a    net.Addr
					host string
					id   uint64
				}{
					{c.LocalAddr(), p.client.Name(), cc.id},
					{c.RemoteAddr(), p.ln.Addr().String(), sc.id},
					{s.LocalAddr(), p.ln.Addr().String(), sc.id},
					{s.RemoteAddr(), p.client.Name(), cc.id},
				} {
					host, port, err := net.SplitHostPort(tc.a.String())
					require.NoError(t, err, tc.a.String())
					require.Equal(t, tc.host, host)
					require.Equal(t, formatID(tc.id), port)
				}

				// Half-closes show in the state.
				require.NoError(t, sc.CloseWrite())
				_, err = c.Read(make([]byte, 1))
				require.Equal(t, io.EOF, err)
				require.Equal(t, ConnWriteClosed, sc.Stats().State)
				require.Equal(t, ConnReadClosed, cc.Stats().State)
			})
		})
	}
}

// A name with a ':' is bracketed, so that the address still splits.
func TestAddrBracketsColon(t *testing.T) {
	a := Addr{Name: "svc:v2", ID: 0xab}
	host, port, err := net.SplitHostPort(a.String())
	require.NoError(t, err)
	require.Equal(t, "svc:v2", host)
	require.Equal(t, formatID(0xab), port)
	require.Equal(t, "svc:v2", Addr{Name: "svc:v2"}.String(), "a listener's address is its name")
}

// Dial accepts a conn's RemoteAddr string (the id is ignored, as a port).
func TestDialConnAddr(t *testing.T) {
	forEachEngine(t, Config{}, func(t *testing.T, p *pair) {
		c, s := p.conns(t)
		defer c.Close()
		defer s.Close()
		go func() {
			if s2, err := p.ln.Accept(); err == nil {
				s2.Close()
			}
		}()
		c2, err := p.dialer.Dial(Network, c.RemoteAddr().String())
		require.NoError(t, err)
		c2.Close()
	})
}

// Conns lists every conn of a transport, on both lanes, and drops them
// once closed at both ends.
func TestTransportConns(t *testing.T) {
	for _, lane := range []string{LaneUCX, LaneTCP} {
		t.Run(lane, func(t *testing.T) {
			forEachEngine(t, Config{Lane: lane}, func(t *testing.T, p *pair) {
				c1, s1 := p.conns(t)
				c2, s2 := p.conns(t)
				ids := func(tr *Transport) []uint64 {
					var out []uint64
					for _, cs := range tr.Conns() {
						out = append(out, cs.ID)
					}
					return out
				}
				require.ElementsMatch(t, []uint64{c1.(*testConn).id, c2.(*testConn).id}, ids(p.client))
				require.ElementsMatch(t, []uint64{s1.(*testConn).id, s2.(*testConn).id}, ids(p.server))
				require.Equal(t, c1.(*testConn).id, p.client.Conns()[0].ID, "oldest first")

				c1.Close()
				s1.Close()
				require.Eventually(t, func() bool { return len(ids(p.client)) == 1 && len(ids(p.server)) == 1 }, 10*time.Second, 5*time.Millisecond)
				require.Equal(t, []uint64{c2.(*testConn).id}, ids(p.client))
				c2.Close()
				s2.Close()
				require.Eventually(t, func() bool { return len(ids(p.client)) == 0 && len(ids(p.server)) == 0 }, 10*time.Second, 5*time.Millisecond)
			})
		})
	}
}

// An answered keepalive PING gives the UCX lane's round trip.
func TestConnStatsRTT(t *testing.T) {
	p := newPair(t, Config{Lane: LaneUCX, KeepAlive: 400 * time.Millisecond})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	require.Eventually(t, func() bool { return c.(*testConn).Stats().RTT > 0 }, 20*time.Second, 10*time.Millisecond,
		"the idle conn's peer is probed after KeepAlive/2 and answers")
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Config.Logger records a refused handshake, on both lanes.
func TestLoggerRefusedHandshake(t *testing.T) {
	for _, lane := range []string{LaneUCX, LaneTCP} {
		t.Run(lane, func(t *testing.T) {
			var buf syncBuffer
			forEachEngine(t, Config{Lane: lane, Logger: slog.New(slog.NewTextHandler(&buf, nil))}, func(t *testing.T, p *pair) {
				ln := pskListener(t, p, bytes.Repeat([]byte("k"), MinPSKLen))
				_, err := p.dialer.Dial(Network, ln.Addr().String())
				require.Error(t, err, "a dialer without the key")
				require.Eventually(t, func() bool { return bytes.Contains([]byte(buf.String()), []byte("refused")) }, 10*time.Second, 5*time.Millisecond)
				require.Contains(t, buf.String(), "level=WARN")
				require.Contains(t, buf.String(), "transport="+p.server.Name())
			})
		})
	}
}

// snapshotHandler is a slog.Handler that takes a Snapshot of every
// transport for each record, as a handler adding stats to its records
// would.
type snapshotHandler struct{ records atomic.Int64 }

func (h *snapshotHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *snapshotHandler) Handle(context.Context, slog.Record) error {
	Snapshots()
	h.records.Add(1)
	return nil
}
func (h *snapshotHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *snapshotHandler) WithGroup(string) slog.Handler      { return h }

// Config.Logger's handler may call back into the transport: a failed
// authentication is logged with no conn's lock held. Before, the dialer's
// "listener did not authenticate" record was logged holding the dialing
// conn's lock, and a handler reading Conns deadlocked the engine.
func TestLoggerHandlerMayReadStats(t *testing.T) {
	h := &snapshotHandler{}
	forEachEngine(t, Config{Logger: slog.New(h)}, func(t *testing.T, p *pair) {
		open := pskListener(t, p, nil)
		d := Dialer{Transport: p.client, PSK: bytes.Repeat([]byte("k"), MinPSKLen), Timeout: 5 * time.Second}
		done := make(chan error, 1)
		go func() {
			_, err := d.Dial(Network, open.Addr().String())
			done <- err
		}()
		select {
		case err := <-done:
			require.ErrorIs(t, err, syscall.ECONNREFUSED)
			require.Contains(t, err.Error(), "did not authenticate")
		case <-time.After(60 * time.Second): // a hang guard
			t.Fatal("the dial hung: the engine is stuck in the log handler")
		}
		require.NotZero(t, h.records.Load(), "the failure was not logged")
	})
}

// A conn's state is named for ConnStats from its phase and which halves
// are shut.
func TestConnStateName(t *testing.T) {
	for _, tc := range []struct {
		s      State
		failed bool
		want   string
	}{
		{State{Phase: PhaseDialing}, false, ConnDialing},
		{State{Phase: PhaseAbandoned}, false, ConnDialing},
		{State{Phase: PhaseAuthPending}, false, ConnAuthPending},
		{State{Phase: PhaseOpen}, false, ConnOpen},
		{State{Phase: PhaseOpen, FinIn: true}, false, ConnReadClosed},
		{State{Phase: PhaseOpen, WShut: true}, false, ConnWriteClosed},
		{State{Phase: PhaseOpen, FinOut: true}, false, ConnWriteClosed},
		{State{Phase: PhaseOpen, FinOut: true, FinIn: true}, false, ConnClosed},
		{State{Phase: PhaseOpen, Closed: true, FinOut: true, FinWait: true}, false, ConnClosing},
		{State{Phase: PhaseOpen, Closed: true}, false, ConnClosed},
		{State{Phase: PhaseDone}, true, ConnFailed},
		{State{Phase: PhaseDone, Closed: true}, true, ConnClosed},
		{State{Phase: PhaseDone}, false, ConnClosed},
	} {
		require.Equal(t, tc.want, stateName(tc.s, tc.failed), "%+v failed=%v", tc.s, tc.failed)
	}
}

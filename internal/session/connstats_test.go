package session

import (
	"bytes"
	"io"
	"net"
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
					{c.LocalAddr(), p.client.Name(), cs.ID},
					{c.RemoteAddr(), p.ln.Addr().String(), ss.ID},
					{s.LocalAddr(), p.ln.Addr().String(), ss.ID},
					{s.RemoteAddr(), p.client.Name(), cs.ID},
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
				require.ElementsMatch(t, []uint64{c1.(*testConn).Stats().ID, c2.(*testConn).Stats().ID}, ids(p.client))
				require.ElementsMatch(t, []uint64{s1.(*testConn).Stats().ID, s2.(*testConn).Stats().ID}, ids(p.server))
				require.Equal(t, c1.(*testConn).Stats().ID, p.client.Conns()[0].ID, "oldest first")

				c1.Close()
				s1.Close()
				require.Eventually(t, func() bool { return len(ids(p.client)) == 1 && len(ids(p.server)) == 1 }, 10*time.Second, 5*time.Millisecond)
				require.Equal(t, []uint64{c2.(*testConn).Stats().ID}, ids(p.client))
				c2.Close()
				s2.Close()
				require.Eventually(t, func() bool { return len(ids(p.client)) == 0 && len(ids(p.server)) == 0 }, 10*time.Second, 5*time.Millisecond)
			})
		})
	}
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

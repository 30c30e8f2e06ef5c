package session

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/stream"
)

// Who is told, phase by phase, and what a waiting dial gets.
func TestEndPolicy(t *testing.T) {
	open, dialing, pending := State{Phase: PhaseOpen}, State{Phase: PhaseDialing}, State{Phase: PhaseAuthPending}
	require.False(t, EndQuiet.TellsPeer(open, true))
	require.True(t, EndGap.TellsPeer(open, true))
	require.False(t, EndGap.TellsPeer(open, false), "never without the peer's stream id")
	require.False(t, EndGap.TellsPeer(pending, true), "RSTIfOpen: not established")
	require.True(t, EndReset(stream.RstAbort, RSTAlways).TellsPeer(pending, true))
	require.True(t, EndReset(stream.RstAbort, RSTAlways).TellsPeer(State{Phase: PhaseAbandoned}, true))
	require.True(t, EndReset(stream.RstProtocol, RSTIfOpen).Discard)
	require.False(t, EndGap.Discard, "a gap keeps what arrived readable")

	reset, refused := errors.New("reset"), errors.New("refused")
	p := EndPolicy{DialErr: refused}
	require.Equal(t, refused, p.Err(dialing, reset))
	require.Equal(t, reset, p.Err(open, reset))
	require.Equal(t, reset, EndQuiet.Err(dialing, reset))
}

// Data that arrived before the peer's FIN and that Transport.Close drops
// unread is lost, not an end of stream: Read reports the close, never
// io.EOF, which would tell the application it had read everything.
func TestMemCloseTransportAfterPeerFinNotEOF(t *testing.T) {
	p := newMemPair(t, Config{})
	cs, err := p.dialer.DialStream(context.Background(), p.ln.Addr().String())
	require.NoError(t, err)
	c := cs.(*Conn)
	s, err := p.ln.Accept()
	require.NoError(t, err)
	_, err = s.Write([]byte("unread"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.state.FinIn && c.in.Unread()
	}, 10*time.Second, time.Millisecond, "the data and FIN never arrived")
	require.NoError(t, p.client.Close())
	n, err := c.Read(make([]byte, 16))
	require.Zero(t, n)
	require.Error(t, err)
	require.NotErrorIs(t, err, io.EOF, "dropped data read as a clean end of stream")
}

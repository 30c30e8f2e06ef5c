package session

import (
	"errors"
	"testing"

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

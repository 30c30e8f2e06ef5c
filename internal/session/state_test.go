package session

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// WINDOW updates go only to a peer that may still send; Close finishes a
// stream at once only when nothing more is to come from the peer.
func TestStateHalves(t *testing.T) {
	open := State{Phase: PhaseOpen}
	require.True(t, open.WindowOpen())
	require.False(t, open.Finished())
	require.False(t, open.WriteClosed())
	fin := State{Phase: PhaseOpen, FinIn: true}
	require.False(t, fin.WindowOpen())
	require.True(t, fin.Finished())
	require.True(t, State{Phase: PhaseOpen, WShut: true}.WriteClosed())
	require.True(t, State{Phase: PhaseOpen, FinOut: true}.WriteClosed())
	for _, p := range []Phase{PhaseDialing, PhaseAbandoned, PhaseDone, PhaseAuthPending} {
		require.False(t, State{Phase: p}.WindowOpen(), "%v", p)
		require.True(t, State{Phase: p}.Finished(), "%v", p)
	}
	require.Equal(t, "auth-pending", PhaseAuthPending.String())
	require.Equal(t, "Phase(9)", Phase(9).String())
}

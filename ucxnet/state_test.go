package ucxnet

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A conn's state names itself for ConnStats from its phase and which
// halves are shut.
func TestConnStateName(t *testing.T) {
	for _, tc := range []struct {
		s      connState
		failed bool
		want   string
	}{
		{connState{phase: stateDialing}, false, ConnDialing},
		{connState{phase: stateAbandoned}, false, ConnDialing},
		{connState{phase: stateAuthPending}, false, ConnAuthPending},
		{connState{phase: stateOpen}, false, ConnOpen},
		{connState{phase: stateOpen, finIn: true}, false, ConnReadClosed},
		{connState{phase: stateOpen, wshut: true}, false, ConnWriteClosed},
		{connState{phase: stateOpen, finOut: true}, false, ConnWriteClosed},
		{connState{phase: stateOpen, finOut: true, finIn: true}, false, ConnClosed},
		{connState{phase: stateOpen, closed: true, finOut: true, finWait: true}, false, ConnClosing},
		{connState{phase: stateOpen, closed: true}, false, ConnClosed},
		{connState{phase: stateDone}, true, ConnFailed},
		{connState{phase: stateDone, closed: true}, true, ConnClosed},
		{connState{phase: stateDone}, false, ConnClosed},
	} {
		require.Equal(t, tc.want, tc.s.name(tc.failed), "%+v failed=%v", tc.s, tc.failed)
	}
}

// WINDOW updates go only to a peer that may still send; Close finishes a
// conn at once only when nothing more is to come from the peer.
func TestConnStateHalves(t *testing.T) {
	open := connState{phase: stateOpen}
	require.True(t, open.windowOpen())
	require.False(t, open.finished())
	fin := connState{phase: stateOpen, finIn: true}
	require.False(t, fin.windowOpen())
	require.True(t, fin.finished())
	for _, p := range []connPhase{stateDialing, stateAbandoned, stateDone, stateAuthPending} {
		require.False(t, connState{phase: p}.windowOpen(), "%v", p)
		require.True(t, connState{phase: p}.finished(), "%v", p)
	}
}

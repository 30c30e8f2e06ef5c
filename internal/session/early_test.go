package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// Early frames are kept as copies, in order, within MaxEarly frames and
// the window's bytes.
func TestEarly(t *testing.T) {
	var e Early
	data := []byte("abcd")
	ev := &engine.Event{Kind: engine.Frame, Data: data, DataLen: len(data), From: 7}
	require.True(t, e.Stash(stream.Header{Kind: stream.KindData, Seq: 0}, ev, 6))
	data[0] = 'X' // the engine reuses its buffer
	require.False(t, e.Stash(stream.Header{Kind: stream.KindData, Seq: 1}, ev, 6), "past the window")
	got := e.Take()
	require.Len(t, got, 1)
	require.Equal(t, "abcd", string(got[0].Data))
	require.Equal(t, uintptr(7), got[0].From)
	require.Empty(t, e.Take(), "taken once")

	empty := &engine.Event{Kind: engine.Frame}
	for i := range MaxEarly {
		require.True(t, e.Stash(stream.Header{Kind: stream.KindWindow, Seq: uint64(i)}, empty, 0), "frame %d", i)
	}
	require.False(t, e.Stash(stream.Header{Kind: stream.KindWindow}, empty, 0), "past MaxEarly")
	got = e.Take()
	require.Len(t, got, MaxEarly)
	for i, f := range got {
		require.Equal(t, uint64(i), f.Header.Seq, "in order")
	}
}

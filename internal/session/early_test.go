package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// Early frames are kept as copies, in order, within MaxEarly frames and
// the window's bytes per endpoint; an endpoint whose frames were not all
// kept is remembered.
func TestEarly(t *testing.T) {
	var e Early
	data := []byte("abcd")
	ev := &engine.Event{Kind: engine.Frame, Data: data, DataLen: len(data), From: 7}
	require.True(t, e.Stash(stream.Header{Kind: stream.KindData, Seq: 0}, ev, 6))
	data[0] = 'X' // the engine reuses its buffer
	require.False(t, e.Stash(stream.Header{Kind: stream.KindData, Seq: 1}, ev, 6), "past the window")
	other := &engine.Event{Kind: engine.Frame, Data: data, DataLen: len(data), From: 8}
	require.True(t, e.Stash(stream.Header{Kind: stream.KindData, Seq: 0}, other, 6), "another endpoint has a window of its own")
	require.Equal(t, 1, e.Lost(7))
	require.Zero(t, e.Lost(8))
	got := e.Take()
	require.Len(t, got, 2)
	require.Equal(t, "abcd", string(got[0].Data))
	require.Equal(t, uintptr(7), got[0].From)
	require.Empty(t, e.Take(), "taken once")
	require.Equal(t, 1, e.Lost(7), "a loss outlives Take")

	e = Early{}
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

// Frames from more endpoints than Early keeps are not kept, and past
// maxEarlyLost such endpoints any endpoint may have lost frames.
func TestEarlySources(t *testing.T) {
	var e Early
	for from := range uintptr(maxEarlySources) {
		require.True(t, e.Stash(stream.Header{Kind: stream.KindPing}, &engine.Event{Kind: engine.Frame, From: from + 1}, 0))
	}
	for from := range uintptr(maxEarlyLost) {
		require.False(t, e.Stash(stream.Header{Kind: stream.KindPing}, &engine.Event{Kind: engine.Frame, From: from + 100}, 0))
		require.Equal(t, 1, e.Lost(from+100))
	}
	require.Zero(t, e.Lost(1))
	require.False(t, e.Stash(stream.Header{Kind: stream.KindPing}, &engine.Event{Kind: engine.Frame, From: 999}, 0))
	require.Equal(t, -1, e.Lost(1), "one loss too many to remember: any endpoint may have lost frames")
}

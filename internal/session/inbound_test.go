package session

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

const testHoldMin = 1024

func newTestInbound(window uint32) *Inbound {
	in := NewInbound(window, testHoldMin, &BufPool{Max: 4})
	return &in
}

// frame is DATA (or FIN, with fin) number seq carrying data, as an engine
// delivers it; held says whether the engine owns its memory (a Ref).
func frame(seq uint64, data []byte, held bool) (stream.Header, *engine.Event) {
	ev := &engine.Event{Kind: engine.Frame, Data: data, DataLen: len(data)}
	if held {
		ev.Ref = stream.Ref{Kind: 1, Ptr: uintptr(seq + 1)}
	}
	return stream.Header{Kind: stream.KindData, Seq: seq}, ev
}

func readAll(t *testing.T, in *Inbound) ([]byte, []stream.Ref) {
	t.Helper()
	var got []byte
	var refs []stream.Ref
	buf := make([]byte, 7) // small: reads cross segment boundaries
	for in.Ready() {
		n, done := in.Read(buf, nil)
		got = append(got, buf[:n]...)
		refs = append(refs, done...)
		in.Consume(n)
	}
	return got, refs
}

// Frames arriving out of order are read in order; a duplicate is refused
// with stream.ErrDuplicate; large payloads are held in engine memory and
// given back by Read, small ones are copied.
func TestInboundOrder(t *testing.T) {
	in := newTestInbound(1 << 20)
	big := bytes.Repeat([]byte{'b'}, testHoldMin)
	h1, ev1 := frame(1, big, true)
	readable, fin, err := in.Push(h1, ev1)
	require.NoError(t, err)
	require.False(t, readable, "frame 1 waits for frame 0")
	require.False(t, fin)
	require.True(t, ev1.Held, "a large payload stays in engine memory")
	require.True(t, in.Unread())
	require.False(t, in.Ready())

	h0, ev0 := frame(0, []byte("small"), true)
	readable, _, err = in.Push(h0, ev0)
	require.NoError(t, err)
	require.True(t, readable)
	require.False(t, ev0.Held, "a small payload is copied")
	_, _, err = in.Push(h0, ev0)
	require.ErrorIs(t, err, stream.ErrDuplicate)

	hf := stream.Header{Kind: stream.KindFin, Seq: 2}
	_, fin, err = in.Push(hf, &engine.Event{Kind: engine.Frame})
	require.NoError(t, err)
	require.True(t, fin)

	got, refs := readAll(t, in)
	require.True(t, bytes.Equal(append([]byte("small"), big...), got), "read in order")
	require.Equal(t, []stream.Ref{ev1.Ref}, refs, "Read gives back the held buffer it emptied")
	require.Zero(t, in.Buffered())
	require.False(t, in.Unread())
}

// Many tiny in-order frames cost about their bytes: they are coalesced
// into pooled buffers of holdMin bytes, not queued one segment each.
func TestInboundTinyFramesCoalesce(t *testing.T) {
	const n = 20000
	in := newTestInbound(1 << 20)
	for i := range n {
		h, ev := frame(uint64(i), []byte{byte(i)}, true)
		_, _, err := in.Push(h, ev)
		require.NoError(t, err)
	}
	require.Equal(t, n, in.Buffered())
	require.LessOrEqual(t, len(in.segs), n/testHoldMin+2, "%d bytes queued as %d segments", n, len(in.segs))
	got, refs := readAll(t, in)
	require.Empty(t, refs)
	require.Len(t, got, n)
	for i := range got {
		require.Equal(t, byte(i), got[i], "byte %d", i)
	}
}

// More than the window, or out-of-order frames whose memory costs more
// than the window, is the peer's violation.
func TestInboundBounds(t *testing.T) {
	in := newTestInbound(testHoldMin)
	h, ev := frame(0, make([]byte, testHoldMin+1), false)
	_, _, err := in.Push(h, ev)
	require.Error(t, err, "past the window")

	in = newTestInbound(4 * testHoldMin)
	var pushErr error
	for i := 1; i <= testHoldMin && pushErr == nil; i++ {
		h, ev := frame(uint64(i), []byte{1}, false) // all ahead of frame 0
		_, _, pushErr = in.Push(h, ev)
	}
	require.ErrorContains(t, pushErr, "out-of-order frames hold")
}

// Keep moves held data to Go memory, still readable, and discards what
// can never be delivered; Drop discards everything. Both hand back the
// engine buffers.
func TestInboundKeepDrop(t *testing.T) {
	in := newTestInbound(1 << 20)
	data := bytes.Repeat([]byte{'k'}, testHoldMin)
	h0, ev0 := frame(0, bytes.Clone(data), true)
	h2, ev2 := frame(2, bytes.Clone(data), true)
	for _, f := range []struct {
		h  stream.Header
		ev *engine.Event
	}{{h0, ev0}, {h2, ev2}} {
		_, _, err := in.Push(f.h, f.ev)
		require.NoError(t, err)
	}
	refs := in.Keep()
	require.ElementsMatch(t, []stream.Ref{ev0.Ref, ev2.Ref}, refs)
	ev0.Data[0] = 'x' // the engine reuses its buffer
	got, refs := readAll(t, in)
	require.Empty(t, refs, "kept data is Go memory")
	require.True(t, bytes.Equal(data, got), "kept data reads as it arrived")

	in = newTestInbound(1 << 20)
	_, _, err := in.Push(h0, ev0)
	require.NoError(t, err)
	require.Equal(t, []stream.Ref{ev0.Ref}, in.Drop())
	require.False(t, in.Unread())
}

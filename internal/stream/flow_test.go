package stream

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSendWindowExhaustion(t *testing.T) {
	w := NewSendWindow(100)
	require.Equal(t, 100, w.Available())
	w.Consume(60)
	require.Equal(t, 40, w.Available())
	w.Consume(40)
	require.Zero(t, w.Available())
	require.Panics(t, func() { w.Consume(1) })
	require.Panics(t, func() { w.Consume(-1) })
	w.Consume(0)
	require.Equal(t, uint64(100), w.Sent())
	require.Equal(t, uint64(100), w.Limit())

	var zero SendWindow
	require.Zero(t, zero.Available())
}

func TestSendWindowUpdates(t *testing.T) {
	w := NewSendWindow(100)
	w.Consume(100)
	require.True(t, w.Update(300))
	require.Equal(t, 200, w.Available())
	require.False(t, w.Update(200), "stale update arriving late")
	require.False(t, w.Update(300), "duplicate update")
	require.Equal(t, uint64(300), w.Limit())
	require.Equal(t, 200, w.Available())
	require.True(t, w.Update(301))
	require.Equal(t, 201, w.Available())

	require.True(t, w.Update(math.MaxUint64))
	require.Equal(t, MaxWindow, w.Available(), "capped at MaxWindow beyond what was sent")
	require.False(t, w.Update(math.MaxUint64))
}

func TestRecvWindowReceive(t *testing.T) {
	w := NewRecvWindow(100)
	require.Equal(t, uint32(100), w.Size())
	require.Equal(t, uint64(100), w.Limit())
	require.NoError(t, w.Receive(60))
	require.ErrorIs(t, w.Receive(41), ErrWindowExceeded)
	require.Equal(t, 60, w.Buffered(), "unchanged on error")
	require.NoError(t, w.Receive(40))
	require.ErrorIs(t, w.Receive(1), ErrWindowExceeded)
	require.NoError(t, w.Receive(0))
	require.Equal(t, 100, w.Buffered())
	require.Panics(t, func() { _ = w.Receive(-1) })
	require.Panics(t, func() { NewRecvWindow(0) })
}

func TestRecvWindowConsumeBatching(t *testing.T) {
	w := NewRecvWindow(100)
	require.NoError(t, w.Receive(100))
	limit, send := w.Consume(24)
	require.False(t, send, "below a quarter of the window")
	require.Equal(t, uint64(100), limit)
	limit, send = w.Consume(1)
	require.True(t, send, "a quarter reached")
	require.Equal(t, uint64(125), limit)
	require.Equal(t, uint64(125), w.Limit())
	require.Equal(t, 75, w.Buffered())
	limit, send = w.Consume(10)
	require.False(t, send)
	require.Equal(t, uint64(125), limit)
	require.Panics(t, func() { w.Consume(66) })
	require.Panics(t, func() { w.Consume(-1) })
	// Peer may now send up to the new limit, not beyond.
	require.NoError(t, w.Receive(25))
	require.ErrorIs(t, w.Receive(1), ErrWindowExceeded)

	tiny := NewRecvWindow(3) // size/4 == 0: threshold is 1 byte
	require.NoError(t, tiny.Receive(1))
	limit, send = tiny.Consume(1)
	require.True(t, send)
	require.Equal(t, uint64(4), limit)
}

// TestFlowSimulation moves 10 MB from a SendWindow to a RecvWindow through
// a 64 KiB window, delivering data and window updates in random order.
func TestFlowSimulation(t *testing.T) {
	const (
		total  = 10 << 20
		window = 64 << 10
	)
	rng := rand.New(rand.NewPCG(1, 2))
	sw, rw := NewSendWindow(window), NewRecvWindow(window)
	var inFlight []int   // data frame sizes on the wire
	var updates []uint64 // window updates on the wire
	sent, read := 0, 0
	for steps := 0; read < total; steps++ {
		require.Less(t, steps, 10_000_000, "no progress")
		switch rng.IntN(4) {
		case 0: // sender writes a frame
			n := min(sw.Available(), 1+rng.IntN(16<<10), total-sent)
			if n > 0 {
				sw.Consume(n)
				sent += n
				inFlight = append(inFlight, n)
			}
		case 1: // a data frame arrives (any one of those in flight)
			if len(inFlight) > 0 {
				i := rng.IntN(len(inFlight))
				require.NoError(t, rw.Receive(inFlight[i]))
				inFlight = append(inFlight[:i], inFlight[i+1:]...)
				require.LessOrEqual(t, rw.Buffered(), window)
			}
		case 2: // the application reads
			if b := rw.Buffered(); b > 0 {
				n := 1 + rng.IntN(b)
				read += n
				if limit, send := rw.Consume(n); send {
					updates = append(updates, limit)
				}
			}
		case 3: // a window update arrives, possibly reordered or duplicated
			if len(updates) > 0 {
				i := rng.IntN(len(updates))
				sw.Update(updates[i])
				if rng.IntN(4) != 0 {
					updates = append(updates[:i], updates[i+1:]...)
				}
			}
		}
		require.LessOrEqual(t, sw.Sent(), rw.Limit(), "sender overran the advertised limit")
	}
	require.Equal(t, total, sent)
	require.Equal(t, uint64(total), sw.Sent())
	require.Zero(t, rw.Buffered())
}

// A peer granting a limit far beyond anything it could buffer does not
// open the sender's window past MaxWindow beyond what was sent.
func TestSendWindowCapsHostileLimit(t *testing.T) {
	w := NewSendWindow(1 << 10)
	w.Consume(1 << 10)
	if !w.Update(math.MaxUint64) {
		t.Fatal("a larger limit should grow the window")
	}
	if got, want := w.Available(), MaxWindow; got != want {
		t.Fatalf("Available after limit 2^64-1 = %d, want %d", got, want)
	}
	w.Consume(MaxWindow)
	if w.Available() != 0 {
		t.Fatal("window not exhausted")
	}
	w.Update(math.MaxUint64) // again: capped relative to the new sent total
	if got := w.Available(); got != MaxWindow {
		t.Fatalf("Available = %d, want %d", got, MaxWindow)
	}
}

func TestRecvWindowResize(t *testing.T) {
	w := NewRecvWindow(100)
	if err := w.Receive(100); err != nil {
		t.Fatal(err)
	}
	if err := w.Receive(1); err == nil {
		t.Fatal("beyond the small window accepted")
	}
	limit, send := w.Resize(1000)
	if !send || limit != 1000 {
		t.Fatalf("Resize(1000) = %d, %v; want 1000, true", limit, send)
	}
	if err := w.Receive(900); err != nil {
		t.Fatal(err)
	}
	if _, send := w.Resize(500); send {
		t.Fatal("shrinking must not advertise")
	}
	if w.Limit() != 1000 {
		t.Fatalf("limit taken back: %d", w.Limit())
	}
}

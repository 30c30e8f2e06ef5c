package progress

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/engine"
)

// writableHandler signals each batch that carries a Writable event.
type writableHandler struct{ writable chan struct{} }

func (h *writableHandler) HandleEvents(evs []engine.Event) {
	for _, ev := range evs {
		if ev.Kind == engine.Writable {
			select {
			case h.writable <- struct{}{}:
			default:
			}
		}
	}
}

// startNoBackstop starts an engine whose idle backstop is an hour: once
// asleep, it wakes only when signalled (or by traffic), so a lost wake-up
// shows as a Writable event that never comes.
func startNoBackstop(t *testing.T) (*Engine, *writableHandler) {
	h := &writableHandler{writable: make(chan struct{}, 1)}
	e, err := Start(Config{Settings: []Setting{{Name: "MM_ERROR_HANDLING", Value: "y"}},
		Spin: 20 * time.Microsecond, IdleTimeout: time.Hour}, h)
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("no UCX to drive in this build: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close(time.Second) })
	return e, h
}

// waitAsleep waits until e's engine goroutine has armed the worker and
// drains the Writable events delivered so far.
func waitAsleep(t *testing.T, e *Engine, h *writableHandler) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !e.armed.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the engine never went to sleep")
		}
	}
	select {
	case <-h.writable:
	default:
	}
}

// expectWritable fails unless a Writable event comes: with the backstop an
// hour away, only a wake-up brings it.
func expectWritable(t *testing.T, h *writableHandler) {
	t.Helper()
	select {
	case <-h.writable:
	case <-time.After(10 * time.Second):
		t.Fatal("no Writable event: the sleeping engine was not woken for the failed Acquire(false)")
	}
}

// A writer whose Acquire(false) fails while the engine is paused gets its
// Writable event once the engine resumes: resuming wakes a sleeping
// engine as giving a Worker back does.
func TestResumeWakesForFailedAcquire(t *testing.T) {
	e, h := startNoBackstop(t)
	for range 3 {
		waitAsleep(t, e, h)
		resume := e.Pause()
		require.Nil(t, e.Acquire(false), "Acquire(false) took a paused worker")
		resume()
		expectWritable(t, h)
	}
}

// A writer whose Acquire(false) fails while Stats holds the worker (to ask
// UCX for an endpoint's transports) gets its Writable event: Stats wakes a
// sleeping engine for it. Whether a given try hits that window is chance;
// every try that fails to acquire must be answered.
func TestStatsWakesForFailedAcquire(t *testing.T) {
	e, h := startNoBackstop(t)
	b := newCollector(t)
	t.Cleanup(func() { _ = b.eng.Close(time.Second) })
	ep, err := connect(e, b.eng.Address())
	require.NoError(t, err)
	u, err := uep(ep)
	require.NoError(t, err)
	misses := 0
	for range 30 {
		waitAsleep(t, e, h)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 200 {
				e.transports.Delete(u) // so that Stats takes the worker
				_ = e.Stats(ep)
			}
		}()
		failed := false
		for !failed {
			select {
			case <-done:
			default:
				if w := e.Acquire(false); w != nil {
					w.GiveBack()
				} else {
					failed = true
				}
				continue
			}
			break
		}
		<-done
		if failed {
			misses++
			expectWritable(t, h)
		}
	}
	t.Logf("%d of 30 tries found the worker held", misses)
}

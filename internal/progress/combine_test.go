package progress

import (
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/engine"
)

// combiner is a collector that also queues frames (engine.Combiner).
type combiner struct {
	*collector
	qmu    sync.Mutex
	ep     engine.EP
	queue  [][]byte // payloads; the header is the frame's id
	ids    []uint64
	combed int // Combine calls that found something
}

func (c *combiner) Combine(s engine.Sender, _ bool) bool {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if len(c.queue) > 0 {
		c.combed++
	}
	for i, p := range c.queue {
		var hdr [20]byte // id, then the sequence number and length SendFrames writes
		binary.LittleEndian.PutUint64(hdr[:], c.ids[i])
		if _, _, err := s.SendFrames(c.ep, hdr[:], 8, 16, c.ids[i], p, max(len(p), 1)); err != nil {
			panic(err)
		}
	}
	c.queue, c.ids = nil, nil
	return false
}

func (c *combiner) push(id uint64, p []byte) {
	c.qmu.Lock()
	c.queue = append(c.queue, p)
	c.ids = append(c.ids, id)
	c.qmu.Unlock()
	c.eng.Queued()
}

// Frames a Combiner queues go out: at once when the engine is free, before
// a later send, and on SendQueued; TrySendFrames fails while another
// goroutine holds the engine.
func TestCombinerQueuedFramesGoOut(t *testing.T) {
	col := &collector{got: map[uint64][]byte{}, done: map[uint64]error{}, cond: make(chan struct{}, 1)}
	a := &combiner{collector: col}
	e, err := Start(Config{Settings: []Setting{{Name: "MM_ERROR_HANDLING", Value: "y"}}, Spin: 20 * time.Microsecond}, a)
	require.NoError(t, err)
	a.eng = e
	b := newCollector(t)
	defer func() {
		require.NoError(t, a.eng.CloseEP(a.ep, false))
		require.NoError(t, a.eng.Close(2*time.Second))
		require.NoError(t, b.eng.Close(2*time.Second))
	}()
	a.ep, err = a.eng.Connect(b.eng.Address())
	require.NoError(t, err)

	want := map[uint64][]byte{}
	a.push(1, []byte("queued to a free engine"))
	want[1] = []byte("queued to a free engine")
	b.expect(t, want)

	// Held by another goroutine: TrySendFrames refuses. A frame queued
	// then goes out before the next send.
	resume := a.eng.Pause()
	var hdr [20]byte
	binary.LittleEndian.PutUint64(hdr[:], 9)
	_, _, ok, err := a.eng.TrySendFrames(a.ep, hdr[:], 8, 16, 9, []byte("x"), 1)
	require.NoError(t, err)
	require.False(t, ok, "TrySendFrames sent while the engine was held")
	resume()
	a.qmu.Lock()
	a.queue, a.ids = append(a.queue, []byte("queued")), append(a.ids, 2) // no Queued call: the flag is what Send checks
	a.qmu.Unlock()
	a.eng.queued.Store(true)
	binary.LittleEndian.PutUint64(hdr[:], 3)
	require.NoError(t, a.eng.Send(a.ep, hdr[:8], []byte("sent after")))
	a.qmu.Lock()
	require.Empty(t, a.queue, "Send did not send the queued frame first")
	a.qmu.Unlock()
	want[2] = []byte("queued")
	want[3] = []byte("sent after")
	b.expect(t, want)

	// SendQueued sends at once, whatever UCX holds.
	a.push(4, []byte("pushed"))
	require.NoError(t, a.eng.SendQueued())
	want[4] = []byte("pushed")
	b.expect(t, want)
	a.qmu.Lock()
	require.NotZero(t, a.combed)
	a.qmu.Unlock()
}

// Queued after Close returns (it once spun forever: the closed engine
// never cleared the flag its unlock loop waits on).
func TestQueuedAfterClose(t *testing.T) {
	col := &collector{got: map[uint64][]byte{}, done: map[uint64]error{}, cond: make(chan struct{}, 1)}
	a := &combiner{collector: col}
	e, err := Start(Config{Settings: []Setting{{Name: "MM_ERROR_HANDLING", Value: "y"}}}, a)
	require.NoError(t, err)
	a.eng = e
	require.NoError(t, e.Close(time.Second))
	done := make(chan struct{})
	go func() {
		e.Queued()
		require.ErrorIs(t, e.SendQueued(), ErrClosed)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Queued after Close did not return")
	}
}

package enginetest

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"github.com/ucxnet/ucxnet/internal/engine"
)

// Frames cuts Data into frames of at most Frame bytes and writes each
// one's sequence number and length into its copy of the header; Frame
// zero sends the header as it is.
func testFramesSplit(t *testing.T, start Start) {
	a, b, ep := pair(t, start)
	// id at 8 is the sequence number; the length goes at 4.
	h := header(2, 0)
	sent, _, err := send(a.e, ep, engine.Frames{Header: h, SeqOff: 8, LenOff: 4, Seq: 100, Data: []byte("abcdefgh"), Frame: 3})
	if err != nil || sent != 8 {
		t.Fatalf("Send: %d, %v", sent, err)
	}
	got := b.r.frames(t, 3)
	for i, want := range []string{"abc", "def", "gh"} {
		ev, ok := got[100+uint64(i)]
		if !ok {
			t.Fatalf("frame with sequence number %d missing", 100+i)
		}
		if string(ev.Data) != want || binary.LittleEndian.Uint32(ev.Header()[4:]) != uint32(len(want)) || ev.Header()[0] != 2 {
			t.Fatalf("frame %d: data %q header %x", i, ev.Data, ev.Header())
		}
	}
}

// A zero-copy send arrives intact; when Send reports it pending, a Done
// event with its token follows, and only then is the buffer free.
func testZeroCopy(t *testing.T, start Start) {
	a, b, ep := pair(t, start)
	const n, frame = 300_000, 64 << 10
	data := payload(3, n)
	var pin runtime.Pinner
	pin.Pin(&data[0])
	sent, pending, err := send(a.e, ep, engine.Frames{Header: header(3, 0), SeqOff: 8, LenOff: 4, Seq: 1000, Data: data,
		Frame: frame, ZeroCopy: true, Token: 77})
	if err != nil || sent != n {
		t.Fatalf("zero-copy Send: %d, %v", sent, err)
	}
	if pending {
		a.r.waitFor(t, engine.Done, "Done event of a pending zero-copy send", func(evs []engine.Event) bool {
			for _, ev := range evs {
				if ev.Token == 77 {
					if ev.Err != nil {
						t.Fatalf("zero-copy send failed: %v", ev.Err)
					}
					return true
				}
			}
			return false
		})
	}
	pin.Unpin()
	want := payload(3, n)
	clear(data)
	frames := (n + frame - 1) / frame
	got := b.r.frames(t, frames)
	for i := range frames {
		ev := got[1000+uint64(i)]
		if !bytes.Equal(ev.Data, want[i*frame:min(n, (i+1)*frame)]) {
			t.Fatalf("zero-copy frame %d differs", i)
		}
	}
}

// A flush finishes at once, or a Done event with its token reports it.
func testFlush(t *testing.T, start Start) {
	a, b, ep := pair(t, start)
	for i := range 8 {
		if _, _, err := send(a.e, ep, engine.Frames{Header: header(1, uint64(i)), Data: payload(i, 100_000)}); err != nil {
			t.Fatal(err)
		}
	}
	w := a.e.Acquire(true)
	done, err := w.Flush(ep, 42)
	w.GiveBack()
	if err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if !done {
		a.r.waitFor(t, engine.Done, "Done event of a flush", func(evs []engine.Event) bool {
			for _, ev := range evs {
				if ev.Token == 42 {
					if ev.Err != nil {
						t.Fatalf("flush failed: %v", ev.Err)
					}
					return true
				}
			}
			return false
		})
	}
	b.r.frames(t, 8)
}

// Data held with Event.Hold stays valid past its batch, while later
// batches come, until Release.
func testHoldRelease(t *testing.T, start Start) {
	a, b, ep := pair(t, start)
	for i := range 6 {
		mark := byte(1)
		if i%2 == 0 {
			mark = holdMark
		}
		if _, _, err := send(a.e, ep, engine.Frames{Header: header(mark, uint64(i)), Data: payload(i, 10_000<<(2*i))}); err != nil {
			t.Fatal(err)
		}
		b.r.frames(t, i+1) // each in a batch of its own
	}
	b.r.mu.Lock()
	held := b.r.held
	b.r.held = nil
	b.r.mu.Unlock()
	if len(held) != 3 {
		t.Fatalf("%d frames held, want 3", len(held))
	}
	for i, h := range held {
		if !bytes.Equal(h.data, h.want) {
			t.Fatalf("held frame %d changed before Release", i)
		}
		b.e.Release(h.ref)
	}
}

// When the peer's engine dies, the endpoint to it fails: an EPError event
// names it (sends on it may fail meanwhile), and nothing crashes.
func testPeerDeath(t *testing.T, start Start) {
	a, b, ep := pair(t, start)
	if _, _, err := send(a.e, ep, engine.Frames{Header: header(1, 1), Data: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	b.r.frames(t, 1)
	if err := b.e.Close(0); err != nil {
		t.Fatalf("Close: %v", err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() { // a failure may show only on a send (or a keepalive)
		for i := uint64(2); ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			_, _, _ = send(a.e, ep, engine.Frames{Header: header(1, i), Data: []byte("after")})
		}
	}()
	a.r.waitFor(t, engine.EPError, "EPError after the peer's engine closed", func(evs []engine.Event) bool {
		for _, ev := range evs {
			if ev.EP == ep {
				if ev.Err == nil {
					t.Fatal("EPError without an error")
				}
				return true
			}
		}
		return false
	})
}

// An endpoint closes with or without force, sends still in flight or not,
// and the engine goes on: a new endpoint to the same peer carries frames.
func testCloseEP(t *testing.T, start Start) {
	a, b, ep := pair(t, start)
	for i := range 4 {
		if _, _, err := send(a.e, ep, engine.Frames{Header: header(1, uint64(i)), Data: payload(i, 100_000)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := closeEP(a.e, ep, false); err != nil {
		t.Fatalf("CloseEP: %v", err)
	}
	ep2, err := connect(a.e, b.e.Address())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := send(a.e, ep2, engine.Frames{Header: header(1, 9), Data: []byte("again")}); err != nil {
		t.Fatal(err)
	}
	if got := b.r.frames(t, 5); string(got[9].Data) != "again" {
		t.Fatalf("frame on the new endpoint: %q", got[9].Data)
	}
	if err := closeEP(a.e, ep2, true); err != nil {
		t.Fatalf("forced CloseEP: %v", err)
	}
}

// A running engine delivers Tick events, idle or not.
func testTick(t *testing.T, start Start) {
	n := startNode(t, start)
	n.r.waitFor(t, engine.Tick, "Tick", func(evs []engine.Event) bool { return len(evs) >= 3 })
}

// Acquire(false) returns nil while another goroutine holds the worker,
// and while the caller holds it itself; a Writable event follows once it
// is given back.
func testAcquireHeld(t *testing.T, start Start) {
	n := startNode(t, start)
	w := n.e.Acquire(true)
	if w == nil {
		t.Fatal("Acquire(true) returned nil")
	}
	if n.e.Acquire(false) != nil {
		t.Fatal("Acquire(false) by the holder returned a worker")
	}
	before := len(n.r.waitFor(t, engine.Writable, "", func([]engine.Event) bool { return true }))
	got := make(chan bool)
	go func() { got <- n.e.Acquire(false) != nil }()
	if <-got {
		t.Fatal("Acquire(false) returned a worker while another goroutine held it")
	}
	w.GiveBack()
	n.r.waitFor(t, engine.Writable, "Writable after the worker was given back", func(evs []engine.Event) bool { return len(evs) > before })
	// The engine's own goroutine may hold the worker for a moment (a
	// progress call): Acquire(false) succeeds once it lets go.
	deadline := time.Now().Add(5 * time.Second)
	for w = n.e.Acquire(false); w == nil && time.Now().Before(deadline); w = n.e.Acquire(false) {
		time.Sleep(time.Millisecond)
	}
	if w == nil {
		t.Fatal("Acquire(false) of a worker nobody else holds returned nil for 5 s")
	}
	w.GiveBack()
}

// Stats and Backlog answer for the engine and for an endpoint, without
// waiting for the worker (the caller may hold it); an endpoint's backlog
// is within the engine's.
func testStats(t *testing.T, start Start) {
	a, b, ep := pair(t, start)
	if _, _, err := send(a.e, ep, engine.Frames{Header: header(1, 1), Data: payload(1, 1000)}); err != nil {
		t.Fatal(err)
	}
	b.r.frames(t, 1)
	all, one := a.e.Stats(engine.EP{}), a.e.Stats(ep)
	if one.Backlog > all.Backlog {
		t.Fatalf("endpoint backlog %d over the engine's %d", one.Backlog, all.Backlog)
	}
	if one, all := a.e.Backlog(ep), a.e.Backlog(engine.EP{}); one > all {
		t.Fatalf("Backlog: endpoint's %d over the engine's %d", one, all)
	}
	if all.Transports != nil {
		t.Fatalf("transports for no endpoint: %v", all.Transports)
	}
	if len(one.Transports) == 0 {
		t.Fatal("no transports for an endpoint that carried a frame")
	}
	w := a.e.Acquire(true)
	defer w.GiveBack()
	done := make(chan struct{})
	go func() {
		a.e.Stats(ep)
		a.e.Stats(engine.EP{})
		a.e.Backlog(ep)
		a.e.Backlog(engine.EP{})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("Stats waited for the held worker")
	}
}

// Close with linger ends the engine: a second Close and the worker's
// methods then return errors, and nothing crashes or hangs.
func testClose(t *testing.T, start Start) {
	a, _, ep := pair(t, start)
	if _, _, err := send(a.e, ep, engine.Frames{Header: header(1, 1), Data: payload(1, 100_000)}); err != nil {
		t.Fatal(err)
	}
	if err := closeEP(a.e, ep, false); err != nil {
		t.Fatal(err)
	}
	if err := a.e.Close(time.Second); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := a.e.Close(time.Second); err == nil {
		t.Fatal("a second Close returned nil")
	}
	w := a.e.Acquire(true)
	_, err := w.Connect(a.e.Address())
	_, _, err2 := w.Send(ep, engine.Frames{Header: header(1, 2)})
	w.GiveBack()
	if err == nil || err2 == nil {
		t.Fatalf("after Close: Connect %v, Send %v", err, err2)
	}
}

// Sends to a peer that stopped draining back up (Backlog and Stats report
// the endpoint's backlog); once the peer drains again, a Writable event
// follows, the backlog empties and every frame arrives.
func testWritableAfterBacklog(t *testing.T, start Start, stall func(a, b engine.Engine) func()) {
	a, b, ep := pair(t, start)
	resume := stall(a.e, b.e)
	resumed := false
	defer func() {
		if !resumed {
			resume()
		}
	}()
	const size, most = 1 << 20, 256
	n := 0
	for ; n < most && a.e.Backlog(ep) == 0; n++ {
		if _, _, err := send(a.e, ep, engine.Frames{Header: header(1, uint64(n)), Data: payload(n, size)}); err != nil {
			t.Fatalf("send %d: %v", n, err)
		}
	}
	if a.e.Stats(ep).Backlog == 0 {
		t.Fatalf("%d MiB sent to a stalled peer and no backlog in Stats", n)
	}
	if all := a.e.Stats(engine.EP{}).Backlog; all == 0 {
		t.Fatal("an endpoint's backlog but none for the engine")
	}
	if all := a.e.Backlog(engine.EP{}); all == 0 {
		t.Fatal("an endpoint's backlog but none for the engine in Backlog")
	}
	before := len(a.r.waitFor(t, engine.Writable, "", func([]engine.Event) bool { return true }))
	resume()
	resumed = true
	a.r.waitFor(t, engine.Writable, "Writable after the peer drained", func(evs []engine.Event) bool { return len(evs) > before })
	got := b.r.frames(t, n)
	for i := range n {
		if !bytes.Equal(got[uint64(i)].Data, payload(i, size)) {
			t.Fatalf("frame %d differs", i)
		}
	}
	deadline := time.Now().Add(wait)
	for a.e.Backlog(ep) != 0 || a.e.Stats(ep).Backlog != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("backlog %d (Stats: %d) left after every frame arrived", a.e.Backlog(ep), a.e.Stats(ep).Backlog)
		}
		time.Sleep(time.Millisecond)
	}
}

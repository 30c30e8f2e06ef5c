// Package enginetest is the conformance suite of internal/engine: the
// contract every engine.Engine keeps, checked the same way for each
// implementation. An engine's tests call Run with a function that starts
// an engine of theirs.
package enginetest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// Start starts an engine that reports to h. Engines it starts within one
// Run must be able to connect to each other. The suite closes the engines
// it starts; Start may register a cleanup that closes them again (a
// second Close returns an error, which such a cleanup ignores).
type Start func(t *testing.T, h engine.Handler) engine.Engine

// wait is how long the suite waits for what must happen: it only catches
// a hang, and is no measure of speed.
const wait = 20 * time.Second

// Options are what an engine's tests tell the suite beyond Start.
type Options struct {
	// Skip names the checks that this engine, as the caller set it up,
	// cannot pass, with the reason each is skipped.
	Skip map[string]string
	// Stall makes sends from a to b back up (a's backlog grows) until
	// resume is called, as a peer that stops draining does. Nil skips
	// the check that needs it.
	Stall func(a, b engine.Engine) (resume func())
}

// Run runs the suite, each check in a subtest with engines of its own.
func Run(t *testing.T, start Start, o Options) {
	checks := []struct {
		name string
		f    func(*testing.T, Start)
	}{
		{"BadAddresses", testBadAddresses},
		{"FramesIntact", testFramesIntact},
		{"FramesSplit", testFramesSplit},
		{"ZeroCopy", testZeroCopy},
		{"Flush", testFlush},
		{"HoldRelease", testHoldRelease},
		{"PeerDeath", testPeerDeath},
		{"CloseEP", testCloseEP},
		{"Tick", testTick},
		{"AcquireHeld", testAcquireHeld},
		{"Stats", testStats},
		{"Close", testClose},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if why, ok := o.Skip[c.name]; ok {
				t.Skip(why)
			}
			c.f(t, start)
		})
	}
	t.Run("WritableAfterBacklog", func(t *testing.T) {
		if o.Stall == nil {
			t.Skip("the engine's tests give no way to stall a peer (Options.Stall)")
		}
		testWritableAfterBacklog(t, start, o.Stall)
	})
}

// recorder is the suite's Handler: it keeps every event, with a copy of
// its header and data, and holds the data of frames whose header's first
// byte is holdMark.
type recorder struct {
	mu   sync.Mutex
	evs  []engine.Event
	held []heldFrame
	more chan struct{}
}

// heldFrame is a frame whose data the recorder held: data is the
// engine's memory, want a copy of it taken when it arrived.
type heldFrame struct {
	data, want []byte
	ref        stream.Ref
}

// holdMark marks a frame whose data the recorder holds past its batch.
const holdMark = 0xb0

func newRecorder() *recorder { return &recorder{more: make(chan struct{}, 1)} }

func (r *recorder) HandleEvents(evs []engine.Event) {
	r.mu.Lock()
	for i := range evs {
		ev := evs[i]
		if ev.Kind == engine.Frame && ev.HdrLen > 0 && ev.Hdr[0] == holdMark {
			ref := evs[i].Hold()
			r.held = append(r.held, heldFrame{data: ev.Data, want: bytes.Clone(ev.Data), ref: ref})
		}
		ev.Data = bytes.Clone(ev.Data)
		r.evs = append(r.evs, ev)
	}
	r.mu.Unlock()
	select {
	case r.more <- struct{}{}:
	default:
	}
}

// waitFor returns the events of kind k once ok says they are enough.
func (r *recorder) waitFor(t *testing.T, k engine.Kind, what string, ok func([]engine.Event) bool) []engine.Event {
	t.Helper()
	deadline := time.After(wait)
	for {
		r.mu.Lock()
		var evs []engine.Event
		for _, ev := range r.evs {
			if ev.Kind == k {
				evs = append(evs, ev)
			}
		}
		r.mu.Unlock()
		if ok(evs) {
			return evs
		}
		select {
		case <-r.more:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("no %s after %v", what, wait)
		}
	}
}

// frames waits for n frames and returns them by the id in their header's
// bytes 8 to 16.
func (r *recorder) frames(t *testing.T, n int) map[uint64]engine.Event {
	t.Helper()
	evs := r.waitFor(t, engine.Frame, fmt.Sprintf("%d frames", n), func(evs []engine.Event) bool { return len(evs) >= n })
	byID := map[uint64]engine.Event{}
	for _, ev := range evs {
		h := ev.Header()
		if len(h) < 16 {
			t.Fatalf("a frame with a header of %d bytes arrived", len(h))
		}
		byID[binary.LittleEndian.Uint64(h[8:])] = ev
	}
	if len(byID) != len(evs) {
		t.Fatalf("%d frames arrived for %d ids", len(evs), len(byID))
	}
	return byID
}

// node is one engine of a check and its recorder.
type node struct {
	e engine.Engine
	r *recorder
}

// pair starts two engines and connects the first to the second; the
// check's cleanup closes them.
func pair(t *testing.T, start Start) (a, b node, ep engine.EP) {
	t.Helper()
	a, b = startNode(t, start), startNode(t, start)
	ep, err := connect(a.e, b.e.Address())
	if err != nil {
		t.Fatalf("Connect to a live engine: %v", err)
	}
	return a, b, ep
}

func startNode(t *testing.T, start Start) node {
	t.Helper()
	r := newRecorder()
	e := start(t, r)
	t.Cleanup(func() { _ = e.Close(time.Second) })
	return node{e, r}
}

func connect(e engine.Engine, addr []byte) (engine.EP, error) {
	w := e.Acquire(true)
	defer w.GiveBack()
	return w.Connect(addr)
}

func send(e engine.Engine, ep engine.EP, f engine.Frames) (int, bool, error) {
	w := e.Acquire(true)
	defer w.GiveBack()
	return w.Send(ep, f)
}

func closeEP(e engine.Engine, ep engine.EP, force bool) error {
	w := e.Acquire(true)
	defer w.GiveBack()
	return w.CloseEP(ep, force)
}

// header returns a 16-byte header: mark, then id at 8.
func header(mark byte, id uint64) []byte {
	h := make([]byte, 16)
	h[0] = mark
	binary.LittleEndian.PutUint64(h[8:], id)
	return h
}

// payload returns n bytes that differ with seed.
func payload(seed, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(seed) ^ byte(i*31) ^ byte(i>>11)
	}
	return p
}

// An address that no engine could have is an error, never a crash; a
// well-formed address of no live engine is an error too.
func testBadAddresses(t *testing.T, start Start) {
	a, b := startNode(t, start), startNode(t, start)
	own := b.e.Address()
	flipped := slices.Clone(own)
	for i := range min(4, len(flipped)) {
		flipped[i] ^= 0xff
	}
	random := payload(7, 200)
	for what, addr := range map[string][]byte{
		"empty": nil, "one byte": {0xff}, "random": random,
		"truncated": own[:len(own)/2], "first bytes flipped": flipped,
	} {
		if ep, err := connect(a.e, addr); err == nil {
			t.Errorf("Connect to a %s address made an endpoint", what)
			_ = closeEP(a.e, ep, true)
		}
	}
	gone := startNode(t, start)
	addr := gone.e.Address()
	if err := gone.e.Close(0); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if ep, err := connect(a.e, addr); err == nil {
		// An engine may make the endpoint and fail it later (UCX does):
		// then a send on it must fail, or an EPError must follow.
		if _, _, err := send(a.e, ep, engine.Frames{Header: header(1, 1)}); err == nil {
			a.r.waitFor(t, engine.EPError, "EPError for an endpoint to a closed engine", func(evs []engine.Event) bool { return len(evs) > 0 })
		}
		_ = closeEP(a.e, ep, true)
	}
}

// Frames of every size arrive with their header and data intact, and the
// sender's buffers are free once Send returns.
func testFramesIntact(t *testing.T, start Start) {
	a, b, ep := pair(t, start)
	sizes := []int{0, 1, 64, 4095, 8192, 65536, 200_000, 1 << 20}
	for i, n := range sizes {
		h, data := header(1, uint64(i)), payload(i, n)
		sent, _, err := send(a.e, ep, engine.Frames{Header: h, Data: data})
		if err != nil || sent != n {
			t.Fatalf("Send of %d bytes: %d, %v", n, sent, err)
		}
		clear(h[8:])
		clear(data) // the caller's buffers are free once Send returns
	}
	got := b.r.frames(t, len(sizes))
	for i, n := range sizes {
		ev, ok := got[uint64(i)]
		switch {
		case !ok:
			t.Fatalf("frame %d missing", i)
		case !bytes.Equal(ev.Data, payload(i, n)) || ev.DataLen != n:
			t.Fatalf("frame %d: %d bytes (DataLen %d) arrived for %d, or differ", i, len(ev.Data), ev.DataLen, n)
		case ev.HdrLen != 16 || ev.Header()[0] != 1:
			t.Fatalf("frame %d: header %x", i, ev.Header())
		case ev.From == 0:
			t.Fatalf("frame %d: no From", i)
		}
	}
}

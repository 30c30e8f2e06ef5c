package memengine

import (
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/engine/enginetest"
)

// recorder keeps what an engine delivers, but for Tick and Writable
// events.
type recorder struct {
	mu   sync.Mutex
	evs  []engine.Event
	more chan struct{}
}

func newRecorder() *recorder { return &recorder{more: make(chan struct{}, 1)} }

func (r *recorder) HandleEvents(evs []engine.Event) {
	r.mu.Lock()
	for _, ev := range evs {
		if ev.Kind == engine.Tick || ev.Kind == engine.Writable {
			continue
		}
		ev.Data = append([]byte(nil), ev.Data...)
		r.evs = append(r.evs, ev)
	}
	r.mu.Unlock()
	select {
	case r.more <- struct{}{}:
	default:
	}
}

// wait returns the events once there are at least n.
func (r *recorder) wait(t *testing.T, n int) []engine.Event {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		r.mu.Lock()
		if len(r.evs) >= n {
			evs := append([]engine.Event(nil), r.evs...)
			r.mu.Unlock()
			return evs
		}
		r.mu.Unlock()
		select {
		case <-r.more:
		case <-deadline:
			t.Fatalf("fewer than %d events", n)
		}
	}
}

func start(t *testing.T, n *Network) (*Engine, *recorder) {
	t.Helper()
	r := newRecorder()
	e, err := n.Start(r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(0) })
	return e, r
}

// connect makes an endpoint from a to b.
func connect(t *testing.T, a, b *Engine) engine.EP {
	t.Helper()
	w := a.Acquire(true)
	defer w.GiveBack()
	ep, err := w.Connect(b.Address())
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// send sends one frame from a.
func send(a *Engine, ep engine.EP, hdr, data []byte) error {
	w := a.Acquire(true)
	defer w.GiveBack()
	_, _, err := w.Send(ep, engine.Frames{Header: hdr, Data: data})
	return err
}

func TestSendFramesAndHooks(t *testing.T) {
	n := NewNetwork()
	a, _ := start(t, n)
	b, rb := start(t, n)
	ep := connect(t, a, b)
	hdr := make([]byte, 16)
	w := a.Acquire(true)
	sent, pending, err := w.Send(ep, engine.Frames{Header: hdr, SeqOff: 0, LenOff: 8, Seq: 7, Data: []byte("abcdefgh"), Frame: 3})
	w.GiveBack()
	if err != nil || sent != 8 || pending {
		t.Fatalf("SendFrames = %d, %v, %v", sent, pending, err)
	}
	evs := rb.wait(t, 3)
	want := []string{"abc", "def", "gh"}
	for i, ev := range evs {
		if ev.Kind != engine.Frame || string(ev.Data) != want[i] || ev.Header()[0] != byte(7+i) || ev.From == 0 {
			t.Fatalf("frame %d: kind %v data %q seq %d from %d", i, ev.Kind, ev.Data, ev.Header()[0], ev.From)
		}
	}

	var calls int
	n.SetHook(func(f *Frame) Action {
		calls++
		return []Action{Drop, Duplicate, HoldBack, HoldBack}[calls-1]
	})
	for _, s := range []string{"dropped", "twice", "late1", "late2"} {
		if err := send(a, ep, hdr, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	n.ReleaseHeld()
	evs = rb.wait(t, 7)[3:]
	got := []string{string(evs[0].Data), string(evs[1].Data), string(evs[2].Data), string(evs[3].Data)}
	if got[0] != "twice" || got[1] != "twice" || got[2] != "late2" || got[3] != "late1" {
		t.Fatalf("after drop, duplicate and hold back: %q", got)
	}
}

func TestInjectAndKill(t *testing.T) {
	n := NewNetwork()
	a, ra := start(t, n)
	b, _ := start(t, n)
	w := a.Acquire(true)
	if _, err := w.Connect([]byte("mem:999")); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Connect to nobody: %v", err)
	}
	if _, err := w.Connect([]byte{0xff}); !errors.Is(err, ErrBadAddress) {
		t.Fatalf("Connect to garbage: %v", err)
	}
	w.GiveBack()
	ep := connect(t, a, b)
	a.Inject(42, []byte("hdr"), []byte("injected"))
	if ev := ra.wait(t, 1)[0]; ev.From != 42 || string(ev.Data) != "injected" {
		t.Fatalf("injected frame: from %d data %q", ev.From, ev.Data)
	}
	b.Kill()
	evs := ra.wait(t, 2)
	if ev := evs[1]; ev.Kind != engine.EPError || ev.EP != ep || !errors.Is(ev.Err, syscall.ECONNRESET) {
		t.Fatalf("after Kill: %+v", ev)
	}
	if err := send(a, ep, []byte("h"), nil); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Send to a killed engine: %v", err)
	}
}

// The engine keeps the contract of every engine.
func TestConformance(t *testing.T) {
	n := NewNetwork()
	enginetest.Run(t, func(t *testing.T, h engine.Handler) engine.Engine {
		e, err := n.Start(h)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}, enginetest.Options{Stall: func(a, _ engine.Engine) func() {
		a.(*Engine).SetBusy(true) // busy: a backlog of 1 to every endpoint
		return func() { a.(*Engine).SetBusy(false) }
	}})
}

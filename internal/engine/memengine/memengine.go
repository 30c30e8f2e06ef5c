// Package memengine is an in-memory engine.Engine: engines on one Network
// send each other frames through Go memory, one delivery goroutine per
// engine, in send order. It exists so that ucxnet's conn logic (handshake,
// windows, close, reset, deadlines, hostile frames) can be tested without
// UCX, CGO_ENABLED=0 included, and so that tests can do what a real network
// rarely does on demand: a Network's Hook drops, duplicates or holds back
// (to reorder) any frame, Inject delivers a frame from a sender that has no
// endpoint, and Kill makes an engine vanish the way a killed process does.
package memengine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// Action is what a Network's Hook does with a frame.
type Action int

// Actions.
const (
	Deliver   Action = iota // deliver it (the default)
	Drop                    // lose it
	Duplicate               // deliver it twice
	HoldBack                // keep it until ReleaseHeld (which reorders)
	Fail                    // fail its send (ErrSendFailed), the endpoint still healthy
)

// ErrSendFailed is what a send whose frame a Hook answered with Fail
// returns: a local failure (UCX out of memory, say) on a healthy endpoint.
var ErrSendFailed = errors.New("memengine: send failed (Fail hook)")

// Frame is a frame in flight, as a Hook sees it.
type Frame struct {
	From, To string // the sending and receiving engines' addresses
	Header   []byte
	Data     []byte
}

// Network connects engines by address.
type Network struct {
	mu      sync.Mutex
	engines map[string]*Engine
	hook    func(*Frame) Action
	held    []heldFrame
	seq     atomic.Uint64 // endpoint and engine ids
}

type heldFrame struct {
	to *Engine
	ev engine.Event
}

// NewNetwork returns an empty network.
func NewNetwork() *Network { return &Network{engines: map[string]*Engine{}} }

// SetHook sets the function that decides every frame's fate (nil: deliver
// all). It runs on the sender's goroutine.
func (n *Network) SetHook(h func(*Frame) Action) {
	n.mu.Lock()
	n.hook = h
	n.mu.Unlock()
}

// ReleaseHeld delivers the frames held back by the Hook, newest first.
func (n *Network) ReleaseHeld() {
	n.mu.Lock()
	held := n.held
	n.held = nil
	n.mu.Unlock()
	for i := len(held) - 1; i >= 0; i-- {
		held[i].to.post(held[i].ev)
	}
}

// Start starts an engine on the network with a fresh address, delivering
// to h.
func (n *Network) Start(h engine.Handler) (*Engine, error) {
	id := n.seq.Add(1)
	e := &Engine{n: n, h: h, addr: fmt.Appendf(nil, "mem:%d", id), wake: make(chan struct{}, 1), done: make(chan struct{})}
	e.comb, _ = h.(engine.Combiner)
	n.mu.Lock()
	n.engines[string(e.addr)] = e
	n.mu.Unlock()
	go e.loop()
	return e, nil
}

// Engine is one in-memory engine. It implements engine.Engine.
type Engine struct {
	n    *Network
	h    engine.Handler
	addr []byte

	mu     sync.Mutex
	inbox  []engine.Event
	eps    []*ep
	closed bool
	wake   chan struct{}
	done   chan struct{}

	sent, batches atomic.Uint64

	// smu is the send lock (the real engine's worker lock): sends,
	// flushes and endpoint closes take it, and a Combiner handler's queued
	// frames go out first (engine.Combiner).
	smu    sync.Mutex
	comb   engine.Combiner
	queued atomic.Bool
	busy   atomic.Bool // SetBusy: TrySendFrames fails, as if the engine were held
}

// ep is an endpoint from one engine to another.
type ep struct {
	id     uintptr
	local  *Engine
	remote string
	closed atomic.Bool
	failed atomic.Bool
}

var _ engine.Engine = (*Engine)(nil)

// ErrBadAddress is returned by Connect for an address no engine of this
// network could have.
var ErrBadAddress = errors.New("memengine: malformed address")

// Address returns the engine's address.
func (e *Engine) Address() []byte { return e.addr }

// Connect creates an endpoint to the engine at addr. An address of no live
// engine fails with an error matching syscall.ECONNREFUSED, as UCX's does
// for an unreachable worker.
func (e *Engine) Connect(addr []byte) (engine.EP, error) {
	if len(addr) < 5 || string(addr[:4]) != "mem:" {
		return engine.EP{}, fmt.Errorf("%w: %q", ErrBadAddress, addr)
	}
	e.n.mu.Lock()
	_, ok := e.n.engines[string(addr)]
	e.n.mu.Unlock()
	if !ok {
		return engine.EP{}, fmt.Errorf("memengine: no engine at %q: %w", addr, syscall.ECONNREFUSED)
	}
	p := &ep{id: uintptr(e.n.seq.Add(1)), local: e, remote: string(addr)}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return engine.EP{}, errors.New("memengine: engine closed")
	}
	e.eps = append(e.eps, p)
	return engine.NewEP(p), nil
}

func epOf(x engine.EP) *ep {
	p, _ := x.Handle().(*ep)
	return p
}

// CloseEP closes ep.
func (e *Engine) CloseEP(x engine.EP, force bool) error {
	p := epOf(x)
	if p == nil {
		return errors.New("memengine: no such endpoint")
	}
	e.lock()
	defer e.unlock()
	p.closed.Store(true)
	e.mu.Lock()
	if i := slices.Index(e.eps, p); i >= 0 {
		e.eps = slices.Delete(e.eps, i, i+1)
	}
	e.mu.Unlock()
	return nil
}

// Flush finishes at once: sends are delivered when made.
func (e *Engine) Flush(engine.EP, uint64) (bool, error) {
	return true, e.SendQueued() // what was queued goes out first
}

// errReset is what a send on a failed or closed endpoint returns.
var errReset = fmt.Errorf("memengine: endpoint failed: %w", syscall.ECONNRESET)

// Send sends one frame.
func (e *Engine) Send(x engine.EP, header, data []byte) error {
	e.lock()
	defer e.unlock()
	return e.send(x, header, data)
}

// lock takes the send lock and sends what the handler queued.
func (e *Engine) lock() {
	e.smu.Lock()
	e.combineLocked(true)
}

// unlock sends what the handler queued (unless busy, standing for a
// backed-up engine) and lets the send lock go; frames queued by a
// goroutine that found it held are sent by whoever takes it next, or here.
func (e *Engine) unlock() {
	e.combineLocked(false)
	e.smu.Unlock()
	for e.queued.Load() && !e.busy.Load() && e.smu.TryLock() {
		e.combineLocked(false) // not busy: nothing is kept, the loop ends
		e.smu.Unlock()
	}
}

func (e *Engine) combineLocked(force bool) {
	if e.comb == nil || !e.queued.Load() {
		return
	}
	e.queued.Store(false)
	if e.comb.Combine(sender{e}, force) {
		e.queued.Store(true)
	}
}

// sender sends for a Combine, the send lock held.
type sender struct{ e *Engine }

func (s sender) SendFrames(x engine.EP, header []byte, seqOff, lenOff int, seq uint64, data []byte, frame int) (int, bool, error) {
	n, err := s.e.sendFrames(x, header, seqOff, lenOff, seq, data, frame)
	return n, false, err
}

func (s sender) BufferedTo(x engine.EP) uint64 { return s.e.BufferedTo(x) }

// SetBusy makes the engine look held and backed up while busy is true:
// TrySendFrames fails, Buffered reports 1, and queued frames wait for an
// operation that forces them out (a send, flush or SendQueued); clearing
// it sends what was queued.
func (e *Engine) SetBusy(busy bool) {
	e.busy.Store(busy)
	if !busy && e.queued.Load() {
		_ = e.SendQueued()
	}
}

// TrySendFrames is SendFrames, unless the engine is busy (SetBusy).
func (e *Engine) TrySendFrames(x engine.EP, header []byte, seqOff, lenOff int, seq uint64, data []byte, frame int) (int, bool, bool, error) {
	if e.busy.Load() || !e.smu.TryLock() {
		return 0, false, false, nil
	}
	e.combineLocked(false) // what others queued (this conn has none), as the UCX engine does
	n, err := e.sendFrames(x, header, seqOff, lenOff, seq, data, frame)
	e.unlock()
	return n, false, true, err
}

// Queued implements engine.Engine: what the handler queued is sent now,
// unless the engine is busy or held.
func (e *Engine) Queued() {
	e.queued.Store(true)
	if !e.busy.Load() && e.smu.TryLock() {
		e.unlock()
	}
}

// SendQueued implements engine.Engine.
func (e *Engine) SendQueued() error {
	e.lock()
	e.unlock()
	return nil
}

// send delivers one frame; the send lock is held.
func (e *Engine) send(x engine.EP, header, data []byte) error {
	p := epOf(x)
	if p == nil || p.closed.Load() || p.failed.Load() {
		return errReset
	}
	e.n.mu.Lock()
	to := e.n.engines[p.remote]
	hook := e.n.hook
	e.n.mu.Unlock()
	if to == nil {
		return errReset
	}
	f := &Frame{From: string(e.addr), To: p.remote, Header: header, Data: data}
	act := Deliver
	if hook != nil {
		act = hook(f)
	}
	if act == Fail {
		return ErrSendFailed
	}
	ev := engine.Event{Kind: engine.Frame, HdrLen: len(f.Header), DataLen: len(f.Data), From: p.id}
	copy(ev.Hdr[:], f.Header)
	if len(f.Data) > 0 {
		ev.Data = append([]byte(nil), f.Data...)
	}
	e.sent.Add(1)
	switch act {
	case Drop:
	case Duplicate:
		to.post(ev)
		dup := ev
		dup.Data = append([]byte(nil), ev.Data...)
		to.post(dup)
	case HoldBack:
		e.n.mu.Lock()
		e.n.held = append(e.n.held, heldFrame{to, ev})
		e.n.mu.Unlock()
	default:
		to.post(ev)
	}
	return nil
}

// SendFrames sends data as frames of at most frame bytes.
func (e *Engine) SendFrames(x engine.EP, header []byte, seqOff, lenOff int, seq uint64, data []byte, frame int) (int, bool, error) {
	e.lock()
	defer e.unlock()
	n, err := e.sendFrames(x, header, seqOff, lenOff, seq, data, frame)
	return n, false, err
}

func (e *Engine) sendFrames(x engine.EP, header []byte, seqOff, lenOff int, seq uint64, data []byte, frame int) (int, error) {
	if frame <= 0 {
		return 0, errors.New("memengine: frame size must be positive")
	}
	h := append([]byte(nil), header...)
	sent := 0
	for sent < len(data) {
		m := min(frame, len(data)-sent)
		binary.LittleEndian.PutUint64(h[seqOff:], seq)
		binary.LittleEndian.PutUint32(h[lenOff:], uint32(m))
		if err := e.send(x, h, data[sent:sent+m]); err != nil {
			return sent, err
		}
		sent += m
		seq++
	}
	return sent, nil
}

// SendFramesZC is SendFrames: the data is copied, so the caller never
// waits.
func (e *Engine) SendFramesZC(x engine.EP, header []byte, seqOff, lenOff int, seq uint64, data []byte, frame int, token uint64) (int, bool, error) {
	e.lock()
	defer e.unlock()
	n, err := e.sendFrames(x, header, seqOff, lenOff, seq, data, frame)
	return n, false, err
}

// Release does nothing: received data is Go memory.
func (e *Engine) Release(...stream.Ref) {}

// Transports names the in-memory transport.
func (e *Engine) Transports(engine.EP) []string { return []string{"mem"} }

// Buffered is 0 (sends are delivered when made), or 1 while busy (SetBusy).
func (e *Engine) Buffered() uint64 {
	if e.busy.Load() {
		return 1
	}
	return 0
}

// BufferedTo is Buffered: busy stands for every endpoint backed up.
func (e *Engine) BufferedTo(engine.EP) uint64 { return e.Buffered() }

// Stats returns the engine's counters.
func (e *Engine) Stats() engine.Stats {
	return engine.Stats{Batches: e.batches.Load()}
}

// Inject delivers a frame to e as if from an endpoint identified by from
// (a sender e has never heard of, if from is new).
func (e *Engine) Inject(from uintptr, header, data []byte) {
	ev := engine.Event{Kind: engine.Frame, HdrLen: len(header), DataLen: len(data), From: from,
		Data: append([]byte(nil), data...)}
	copy(ev.Hdr[:], header)
	e.post(ev)
}

// Close stops the engine; every endpoint of other engines to it fails
// (EPError), as when a peer process dies.
func (e *Engine) Close(time.Duration) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return errors.New("memengine: engine closed")
	}
	e.closed = true
	e.mu.Unlock()
	close(e.done)
	e.n.mu.Lock()
	delete(e.n.engines, string(e.addr))
	others := make([]*Engine, 0, len(e.n.engines))
	for _, o := range e.n.engines {
		others = append(others, o)
	}
	e.n.mu.Unlock()
	for _, o := range others {
		o.peerGone(string(e.addr))
	}
	return nil
}

// Kill makes e vanish at once, as a SIGKILLed process: the same as Close.
func (e *Engine) Kill() { _ = e.Close(0) }

// peerGone fails e's endpoints to the engine at addr.
func (e *Engine) peerGone(addr string) {
	e.mu.Lock()
	var failed []*ep
	for _, p := range e.eps {
		if p.remote == addr && !p.closed.Load() && p.failed.CompareAndSwap(false, true) {
			failed = append(failed, p)
		}
	}
	e.mu.Unlock()
	for _, p := range failed {
		e.post(engine.Event{Kind: engine.EPError, EP: engine.NewEP(p), Err: errReset})
	}
}

// post queues an event for the engine's handler.
func (e *Engine) post(ev engine.Event) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.inbox = append(e.inbox, ev)
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *Engine) loop() {
	var batch []engine.Event
	ticker, _ := e.h.(engine.Ticker)
	tick := time.NewTicker(engine.TickEvery)
	defer tick.Stop()
	for {
		select {
		case <-e.wake:
		case now := <-tick.C:
			if ticker != nil {
				ticker.Tick(now)
			}
			continue
		case <-e.done:
			return
		}
		e.mu.Lock()
		batch, e.inbox = e.inbox, batch[:0]
		e.mu.Unlock()
		if len(batch) > 0 {
			e.batches.Add(1)
			e.h.HandleEvents(batch)
			clear(batch)
		}
	}
}

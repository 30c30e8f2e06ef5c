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
	e.wk.e = e
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

	// smu is the worker's lock (Acquire), as the real engine's is.
	smu    sync.Mutex
	wk     worker
	busy   atomic.Bool // SetBusy: Acquire(false) fails, as if the engine were held and backed up
	wanted atomic.Bool // an Acquire(false) failed: a Writable event is owed
	// transports is what Stats reports as every endpoint's transports
	// (SetTransports; nil: "mem").
	transports atomic.Pointer[[]string]
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

// errClosed is what the worker's methods return once the engine is closed.
var errClosed = errors.New("memengine: engine closed")

// Address returns the engine's address.
func (e *Engine) Address() []byte { return e.addr }

// Acquire takes the worker; without wait it returns nil while another
// goroutine holds it or the engine is busy (SetBusy), and a Writable event
// follows once it is free.
func (e *Engine) Acquire(wait bool) engine.Worker {
	if wait {
		e.smu.Lock()
		return &e.wk
	}
	if !e.busy.Load() && e.smu.TryLock() {
		return &e.wk
	}
	e.wanted.Store(true)
	if !e.busy.Load() && e.smu.TryLock() {
		return &e.wk
	}
	return nil
}

// SetBusy makes the engine look held and backed up while busy is true:
// Acquire(false) fails and every backlog reads 1; clearing it posts a
// Writable event.
func (e *Engine) SetBusy(busy bool) {
	e.busy.Store(busy)
	if !busy {
		e.wanted.Store(false)
		e.post(engine.Event{Kind: engine.Writable})
	}
}

// worker is the engine.Worker of whoever holds smu.
type worker struct{ e *Engine }

var _ engine.Worker = (*worker)(nil)

// Connect creates an endpoint to the engine at addr. An address of no live
// engine fails with an error matching syscall.ECONNREFUSED, as UCX's does
// for an unreachable worker.
func (k *worker) Connect(addr []byte) (engine.EP, error) {
	e := k.e
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
		return engine.EP{}, errClosed
	}
	e.eps = append(e.eps, p)
	return engine.NewEP(p), nil
}

func epOf(x engine.EP) *ep {
	p, _ := x.Handle().(*ep)
	return p
}

// CloseEP closes ep.
func (k *worker) CloseEP(x engine.EP, force bool) error {
	e := k.e
	p := epOf(x)
	if p == nil || p.local != e {
		return errors.New("memengine: no such endpoint")
	}
	p.closed.Store(true)
	e.mu.Lock()
	if i := slices.Index(e.eps, p); i >= 0 {
		e.eps = slices.Delete(e.eps, i, i+1)
	}
	e.mu.Unlock()
	return nil
}

// Flush finishes at once: sends are delivered when made.
func (k *worker) Flush(x engine.EP, _ uint64) (bool, error) {
	if k.e.isClosed() {
		return false, errClosed
	}
	if p := epOf(x); p == nil || p.failed.Load() {
		return false, errReset
	}
	return true, nil
}

// GiveBack lets the worker go; a Writable event follows if an
// Acquire(false) found it held.
func (k *worker) GiveBack() {
	e := k.e
	e.smu.Unlock()
	if !e.busy.Load() && e.wanted.Swap(false) {
		e.post(engine.Event{Kind: engine.Writable})
	}
}

func (e *Engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// errReset is what a send on a failed or closed endpoint returns.
var errReset = fmt.Errorf("memengine: endpoint failed: %w", syscall.ECONNRESET)

// send delivers one frame; the worker is held.
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

// Send sends f's frames; the data is copied, so a zero-copy send is done
// when Send returns (never pending).
func (k *worker) Send(x engine.EP, f engine.Frames) (int, bool, error) {
	e := k.e
	if e.isClosed() {
		return 0, false, errClosed
	}
	if f.Frame <= 0 {
		if err := e.send(x, f.Header, f.Data); err != nil {
			return 0, false, err
		}
		return len(f.Data), false, nil
	}
	if f.SeqOff < 0 || f.LenOff < 0 || f.SeqOff+8 > len(f.Header) || f.LenOff+4 > len(f.Header) {
		return 0, false, errors.New("memengine: sequence or length offset outside the header")
	}
	h := append([]byte(nil), f.Header...)
	sent, seq := 0, f.Seq
	for sent < len(f.Data) {
		m := min(f.Frame, len(f.Data)-sent)
		binary.LittleEndian.PutUint64(h[f.SeqOff:], seq)
		binary.LittleEndian.PutUint32(h[f.LenOff:], uint32(m))
		if err := e.send(x, h, f.Data[sent:sent+m]); err != nil {
			return sent, false, err
		}
		sent += m
		seq++
	}
	return sent, false, nil
}

// Release does nothing: received data is Go memory.
func (e *Engine) Release(...stream.Ref) {}

// Stats returns the engine's counters, or an endpoint's backlog and
// transport ("mem", unless SetTransports says otherwise). The backlog is 0 (sends are delivered when made), or
// 1 while busy (SetBusy).
func (e *Engine) Stats(x engine.EP) engine.Stats {
	var st engine.Stats
	if e.busy.Load() {
		st.Backlog = 1
	}
	if x.Valid() {
		st.Transports = []string{"mem"}
		if tl := e.transports.Load(); tl != nil {
			st.Transports = slices.Clone(*tl)
		}
		return st
	}
	st.Batches = e.batches.Load()
	return st
}

// Backlog returns 0 (sends are delivered when made), or 1 while busy
// (SetBusy).
func (e *Engine) Backlog(engine.EP) uint64 {
	if e.busy.Load() {
		return 1
	}
	return 0
}

// SetTransports sets what Stats reports as the transports of every
// endpoint of e, as UCX names them ("posix/memory", "tcp/lo"), so that the
// conn logic takes its path for one; none reports them not known yet, as
// for an endpoint UCX is still wiring up.
func (e *Engine) SetTransports(tl ...string) {
	tl = slices.Clone(tl)
	e.transports.Store(&tl)
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
	tick := time.NewTicker(engine.TickEvery)
	defer tick.Stop()
	for {
		select {
		case <-e.wake:
		case <-tick.C:
			e.h.HandleEvents([]engine.Event{{Kind: engine.Tick}})
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

// Package progress is ucxnet's progress engine: the one owner of a UCX
// worker.
//
// The worker runs in UCX's SERIALIZED thread mode and every call into it
// goes through the engine's mutex, which Acquire takes, so any goroutine
// may send directly — no hand-off to a dedicated OS thread (measured here
// at ~17 µs a hop) sits on the write path. One engine goroutine drives
// ucp_worker_progress, receives what UCX reported as a batch of events
// from a single cgo call, and hands the batch to a Handler. After activity
// it spins for a while (longer after bulk frames that keep arriving just
// after it fell asleep; not at all after a wake that came long after it
// fell asleep: requests spaced in time); when quiet it arms the
// worker and sleeps in poll(2) on the worker's event fd, so an idle
// process burns no CPU. Submitters wake it with ucp_worker_signal only
// when it is asleep and, between requests spaced in time, only when UCX
// holds work that only progress advances.
package progress

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ucxnet/ucxnet/internal/cucx"
	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// pendingPoll is the longest sleep while UCX holds sends it could not
// start yet.
const pendingPoll = time.Millisecond

// sporadicGap is the quiet spell after which traffic counts as requests
// spaced in time, for a spin of spin: no spin after the batch it brings.
func sporadicGap(spin time.Duration) time.Duration { return 4 * spin }

// Engine implements engine.Engine over a real UCX worker.
var _ engine.Engine = (*Engine)(nil)

// ErrUnsupported is returned (wrapped) by Start in a build without cgo or
// off Linux: there is no UCX to drive.
var ErrUnsupported = cucx.ErrUnsupported

// Version returns the version of the UCX library in use, e.g. "1.13.1"
// (empty in a build without UCX).
func Version() string { return cucx.Version() }

// Setting is one UCX configuration variable, named without the UCX_ prefix.
type Setting struct{ Name, Value string }

// Config tunes an engine.
type Config struct {
	// Settings are UCX configuration overrides (names without UCX_).
	Settings []Setting
	// Spin is how long the engine keeps polling after the last activity
	// before it arms the worker and sleeps, at least. Zero sleeps at once
	// (unless SpinMax lets the window grow).
	Spin time.Duration
	// SpinMax is the longest the spin after a bulk frame grows to,
	// capped at IdleTimeout: the window grows while bulk frames keep
	// arriving just after the engine fell asleep. At or below Spin it
	// stays at Spin.
	SpinMax time.Duration
	// MaxBatch bounds the events gathered per progress call (default 256).
	MaxBatch int
	// IdleTimeout is the longest sleep between progress calls, a backstop
	// for UCX timers such as keepalive (default 100 ms).
	IdleTimeout time.Duration
}

// ErrClosed is returned by methods called after Close.
var ErrClosed = errors.New("progress: engine closed")

// Engine owns a UCX worker and drives its progress.
type Engine struct {
	cfg  Config
	h    engine.Handler
	addr []byte
	// wireupHazard: the UCX loaded is a 1.13 release, which aborts when a
	// worker is destroyed with a wireup reply queued (Close flushes).
	wireupHazard bool

	mu     sync.Mutex // serializes every call into w; Acquire takes it
	w      *cucx.Worker
	closed bool
	wk     worker // the Worker handed to whoever holds mu

	submits  atomic.Uint64 // bumped after each submission
	armed    atomic.Bool   // the engine goroutine is (about to be) asleep
	stopping atomic.Bool
	done     chan struct{}
	// wanted is set when an Acquire(false) found the worker held: a
	// Writable event is owed once it is given back.
	wanted atomic.Bool

	relMu   sync.Mutex
	release []stream.Ref // held data to release at the next progress call
	relBuf  []stream.Ref // the engine goroutine's swap buffer

	// UCX's counters after the last call into it (noteStats).
	buffered, inflight, zcFrames, immSends atomic.Uint64
	quiet                                  atomic.Bool // the engine's last wake came after a quiet spell (see sent)
	// transports caches each endpoint's transports once known
	// (cucx.EP → []string).
	transports sync.Map

	wakeups atomic.Uint64
	batches atomic.Uint64

	// Engine goroutine only: cucx's BufferedDone at the last Writable
	// event, and the buffer pool's use as last seen (trimPool).
	doneSeen    uint64
	poolGets    uint64
	poolUsed    time.Time
	poolTrimmed bool
}

// Start opens a worker and starts its engine goroutine, which hands what
// arrives to h.
func Start(cfg Config, h engine.Handler) (*Engine, error) {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 256
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 100 * time.Millisecond
	}
	settings := make([]cucx.Setting, len(cfg.Settings))
	for i, st := range cfg.Settings {
		settings[i] = cucx.Setting{Name: st.Name, Value: st.Value}
	}
	w, err := cucx.Open(settings)
	if err != nil {
		return nil, err
	}
	addr, err := w.Address()
	if err != nil {
		w.Close()
		return nil, err
	}
	e := &Engine{cfg: cfg, h: h, w: w, addr: addr, done: make(chan struct{}),
		wireupHazard: strings.HasPrefix(cucx.Version(), "1.13.")}
	e.wk.e = e
	e.quiet.Store(true) // nothing came yet
	go e.loop()
	return e, nil
}

// Address returns the worker's packed address.
func (e *Engine) Address() []byte { return e.addr }

// Release hands back data held with engine.Event.Hold. It is released at
// the engine's next progress call (within its idle timeout at the latest).
func (e *Engine) Release(refs ...stream.Ref) {
	if len(refs) == 0 {
		return
	}
	e.relMu.Lock()
	e.release = append(e.release, refs...)
	e.relMu.Unlock()
}

// takeReleases swaps out the pending releases (engine goroutine).
func (e *Engine) takeReleases() []stream.Ref {
	e.relMu.Lock()
	r := e.release
	e.release = e.relBuf[:0]
	e.relMu.Unlock()
	e.relBuf = r
	return r
}

// noteStats publishes what UCX holds after a call into it (the worker is
// locked) for Stats and the wake-up rules.
func (e *Engine) noteStats(st cucx.Stats) {
	e.buffered.Store(st.InflightBytes)
	e.inflight.Store(st.Inflight)
	e.zcFrames.Store(st.ZCFrames)
	e.immSends.Store(st.ImmSends)
}

// Stats returns the engine's counters as of the last call into UCX, or
// ep's backlog and transports. It never waits for the worker: an
// endpoint's transports are learnt when it is made, or asked of UCX here
// if the worker is free (nil otherwise).
func (e *Engine) Stats(ep engine.EP) engine.Stats {
	if !ep.Valid() {
		return engine.Stats{
			Backlog: e.buffered.Load(), Inflight: e.inflight.Load(), ZCFrames: e.zcFrames.Load(),
			ImmSends: e.immSends.Load(), Wakeups: e.wakeups.Load(), Batches: e.batches.Load(),
		}
	}
	u, err := uep(ep)
	if err != nil {
		return engine.Stats{}
	}
	st := engine.Stats{Backlog: e.w.Buffered(u)}
	if tl, ok := e.transports.Load(u); ok {
		st.Transports = tl.([]string)
		return st
	}
	if e.mu.TryLock() { // never waits: the caller may hold the worker
		if !e.closed {
			st.Transports = e.learnTransports(u)
		}
		e.unlock()
	}
	return st
}

// Backlog returns ep's backlog (all endpoints' for the zero EP) as of
// now: one atomic read of the counter UCX's send accounting keeps.
func (e *Engine) Backlog(ep engine.EP) uint64 {
	if !ep.Valid() {
		return e.buffered.Load()
	}
	u, ok := ep.Handle().(cucx.EP)
	if !ok || !u.Valid() {
		return 0
	}
	return e.w.Buffered(u)
}

// learnTransports asks UCX which transports carry u and keeps the answer
// once there is one. The worker is locked.
func (e *Engine) learnTransports(u cucx.EP) []string {
	tl := cucx.Transports(e.w.EPInfo(u))
	if tl != nil {
		e.transports.Store(u, tl)
	}
	return tl
}

// Pause stops the engine — progress and every call into UCX — until
// resume is called: a peer whose process is stopped, for tests.
func (e *Engine) Pause() (resume func()) {
	e.mu.Lock()
	return e.unlock
}

// closeFlushBudget bounds Close's wait for its worker to settle: a wireup
// reply goes out within milliseconds when its peer is reachable, and a
// dead or stopped peer would hold it for ever.
const closeFlushBudget = 250 * time.Millisecond

// closeQuiet is how long UCX must have had nothing to do before Close
// destroys a UCX 1.13 worker.
const closeQuiet = 10 * time.Millisecond

// Close stops the engine goroutine, gives UCX up to linger to finish what
// it still owns (queued sends, endpoint closes), then destroys the worker.
// The caller closes its endpoints first.
//
// With UCX 1.13 the worker settles first, for up to closeFlushBudget:
// UCX 1.13 aborts when a worker is destroyed with a wireup reply of its
// own still queued (ucp_request.c:684, "got REP message"), as it is for a
// few milliseconds after a peer's first message, until the connection
// back to that peer is up. A dead or stopped peer that holds it up does
// not keep the worker: it is destroyed as it would have been.
func (e *Engine) Close(linger time.Duration) error {
	if !e.stopping.CompareAndSwap(false, true) {
		<-e.done
		return ErrClosed
	}
	e.mu.Lock()
	_ = e.w.Signal()
	e.mu.Unlock()
	<-e.done
	deadline := time.Now().Add(linger)
	e.drain(deadline, func(int, int) bool { return e.w.Stats().Inflight > 0 })
	if linger > 0 && e.wireupHazard {
		e.settle(time.Now().Add(min(linger, closeFlushBudget)))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	e.w.ReleaseEvents()
	e.w.Release(e.takeReleases()) // data still held is the handler's bug; release it anyway
	if n := e.w.Stats().Inflight; n > 0 {
		// UCX asserts (aborts the process) when a worker is destroyed with
		// requests outstanding: leak it rather than crash.
		return fmt.Errorf("progress: %d UCX operations still outstanding after %v; worker leaked", n, linger)
	}
	e.w.Close()
	return nil
}

// settle progresses the stopped engine's worker, handing its events to the
// handler, until UCX has had nothing to do for closeQuiet — no progress,
// no event, a worker flush done — or until deadline. A worker flush alone
// does not cover a wireup reply: UCX completes it once its transports hold
// no sends, while the reply still waits in its endpoint's queue for the
// connection back (ucp_worker_flush_nbx in UCX 1.13's flush.c).
func (e *Engine) settle(deadline time.Time) {
	active := time.Now()
	flushing := false
	e.drain(deadline, func(n, events int) bool {
		if flushing {
			flushing = e.w.Flushing()
		}
		if !flushing {
			done, err := e.w.FlushWorker()
			flushing = err == nil && !done
		}
		now := time.Now()
		if n > 0 || events > 0 || flushing {
			active = now
		}
		return now.Sub(active) < closeQuiet
	})
}

// drain progresses the stopped engine's worker, handing its events to the
// handler, while busy (called with e.mu held, after each progress call,
// with UCX's progress count and the events it brought) and deadline has
// not passed.
func (e *Engine) drain(deadline time.Time, busy func(n, events int) bool) {
	var evs []cucx.Event
	for {
		rel := e.takeReleases()
		e.mu.Lock()
		var n int
		evs, n = e.w.Progress(evs[:0], e.cfg.MaxBatch, rel)
		more := busy(n, len(evs))
		e.mu.Unlock()
		if len(evs) > 0 {
			e.h.HandleEvents(evs)
			e.markHeld(evs)
			clear(evs)
		}
		if !more || time.Now().After(deadline) {
			return
		}
		time.Sleep(50 * time.Microsecond)
	}
}

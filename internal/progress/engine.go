// Package progress is ucxnet's progress engine: the one owner of a UCX
// worker.
//
// The worker runs in UCX's SERIALIZED thread mode and every call into it
// goes through the engine's mutex, so any goroutine may send directly — no
// hand-off to a dedicated OS thread (measured here at ~17 µs a hop) sits on
// the write path. One engine goroutine drives ucp_worker_progress, receives
// what UCX reported as a batch of events from a single cgo call, and hands
// the batch to a Handler. After activity it spins for a while (longer after
// bulk frames that keep arriving just after it fell asleep: spin.go; not
// at all after a wake that came long after it fell asleep: requests spaced
// in time); when quiet it arms the worker and sleeps in poll(2) on the
// worker's event fd, so an idle process burns no CPU. Submitters wake it with
// ucp_worker_signal only when it is asleep and, between requests spaced in
// time, only when UCX holds work that only progress advances (sent).
package progress

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ucxnet/ucxnet/internal/cucx"
	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// maxQueueWait is the longest the engine lets frames its handler queued
// (engine.Combiner) wait for UCX to catch up with the sends it could not
// start, before it sends them anyway.
const maxQueueWait = 100 * time.Microsecond

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
	// SpinMax is the longest the spin after a bulk frame grows to (see
	// spin.go), capped at IdleTimeout. At or below Spin it stays at Spin.
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

	mu     sync.Mutex // serializes every call into w
	w      *cucx.Worker
	closed bool

	submits  atomic.Uint64 // bumped after each submission
	armed    atomic.Bool   // the engine goroutine is (about to be) asleep
	stopping atomic.Bool
	done     chan struct{}

	relMu   sync.Mutex
	release []stream.Ref // held data to release at the next progress call
	relBuf  []stream.Ref // the engine goroutine's swap buffer

	buffered atomic.Uint64 // cucx Stats.InflightBytes after the last call into UCX
	inflight atomic.Uint64 // cucx Stats.Inflight after the last call into UCX
	quiet    atomic.Bool   // the engine's last wake came after a quiet spell (see sent)

	comb   engine.Combiner // the handler, if it queues frames (nil: it does not)
	queued atomic.Bool     // comb has frames queued
	fresh  atomic.Bool     // comb queued frames since its last Combine
	// keptAt is cucx's BufferedDone when the last Combine kept frames (for
	// backed-up endpoints) and sent none: until a buffered send completes,
	// an unforced Combine would keep them again (under mu).
	keptAt    uint64
	keptValid bool
	// combined is set (under mu) when a Combine sent a frame while the
	// worker was held; unlock then wakes the engine for what UCX could not
	// send. combineSends counts the frames Combines sent (under mu).
	combined     bool
	combineSends uint64

	wakeups atomic.Uint64
	batches atomic.Uint64

	// The buffer pool's use, as the engine goroutine last saw it
	// (trimPool).
	poolGets    uint64
	poolUsed    time.Time
	poolTrimmed bool
}

// poolIdle is how long the worker's send and receive buffer pool goes
// unused before the buffers it holds beyond each size class's few are
// freed (cucx_trim_pool): a burst of large frames leaves up to 64 MiB
// pooled, which an idle process should not keep.
const poolIdle = time.Second

// trimPool frees the pool's surplus once it has been idle for poolIdle.
// The worker is locked; engine goroutine, once per tick.
func (e *Engine) trimPool(st cucx.Stats, now time.Time) {
	if st.PoolGets != e.poolGets || e.poolUsed.IsZero() {
		e.poolGets, e.poolUsed, e.poolTrimmed = st.PoolGets, now, false
		return
	}
	if !e.poolTrimmed && now.Sub(e.poolUsed) >= poolIdle {
		e.w.TrimPool()
		e.poolTrimmed = true
	}
}

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
	e := &Engine{cfg: cfg, h: h, w: w, addr: addr, done: make(chan struct{})}
	e.quiet.Store(true) // nothing came yet
	e.comb, _ = h.(engine.Combiner)
	go e.loop()
	return e, nil
}

// Address returns the worker's packed address.
func (e *Engine) Address() []byte { return e.addr }

// do runs f with the worker locked, then wakes the engine. f must not
// block.
func (e *Engine) do(f func(w *cucx.Worker) error) error {
	if err := e.locked(f); err != nil {
		return err
	}
	e.kick()
	return nil
}

func (e *Engine) locked(f func(w *cucx.Worker) error) error {
	e.lock()
	defer e.unlock()
	if e.closed {
		return ErrClosed
	}
	err := f(e.w)
	e.noteStats(e.w.Stats())
	return err
}

// noteStats publishes what UCX holds after a call into it (the worker is
// locked) for the readers of buffered and inflight.
func (e *Engine) noteStats(st cucx.Stats) {
	e.buffered.Store(st.InflightBytes)
	e.inflight.Store(st.Inflight)
}

// doSend runs a send with the worker locked (see do), then wakes the
// engine only if the send left it work (see sent).
func (e *Engine) doSend(f func(w *cucx.Worker) error) error {
	if err := e.locked(f); err != nil {
		return err
	}
	e.sent()
	return nil
}

// lock takes the worker, then sends what the handler queued (Combine), so
// that it goes out before whatever the caller sends.
func (e *Engine) lock() {
	e.mu.Lock()
	e.combineLocked(true)
}

// lockLoop takes the worker for the engine goroutine's own calls (progress,
// arm): queued frames for endpoints that are backed up stay queued.
func (e *Engine) lockLoop() {
	e.mu.Lock()
	e.combineLocked(false)
}

// unlock lets the worker go, after sending what the handler queued while
// it was held (but for backed-up endpoints). Frames queued by a goroutine
// that found the worker held, after that, are sent by whoever takes the
// worker next: this goroutine, if nobody else does and they can go.
func (e *Engine) unlock() {
	e.combineLocked(false)
	sent := e.combined
	e.combined = false
	e.mu.Unlock()
	for e.fresh.Load() && e.mu.TryLock() {
		e.combineLocked(false)
		progressed := e.combined
		e.combined = false
		e.mu.Unlock()
		if !progressed {
			break // all wait for backed-up endpoints: the engine goroutine sees to them
		}
		sent = true
	}
	if sent || e.queued.Load() {
		e.sent() // the engine must progress what UCX could not send at once, or see to kept frames
	}
}

// combineLocked has the handler send what it queued (e.mu is held): all of
// it if force, else what is not for a backed-up endpoint, where another
// frame would only wait behind the sends UCX could not start, and the
// queued frame keeps growing with the writes that follow (autocorking).
// e.combined reports that a frame was sent.
func (e *Engine) combineLocked(force bool) {
	if e.comb == nil || !e.queued.Load() {
		return
	}
	if e.closed {
		e.queued.Store(false) // nothing will be sent again
		return
	}
	if !force && !e.fresh.Load() && e.keptValid && e.w.Stats().BufferedDone == e.keptAt {
		return // only kept frames, and their endpoints have not moved
	}
	e.fresh.Store(false) // before Combine: frames queued during it set them again
	e.queued.Store(false)
	before := e.combineSends
	kept := e.comb.Combine(lockedSender{e}, force)
	if kept {
		e.queued.Store(true)
	}
	e.keptValid = kept && e.combineSends == before
	e.keptAt = e.w.Stats().BufferedDone
	if e.combineSends != before {
		e.noteStats(e.w.Stats())
		e.combined = true
	}
}

// lockedSender sends for a Combine: the worker is already held.
type lockedSender struct{ e *Engine }

func (s lockedSender) SendFrames(ep engine.EP, header []byte, seqOff, lenOff int, seq uint64, data []byte, frame int) (int, bool, error) {
	u, err := uep(ep)
	if err != nil {
		return 0, false, err
	}
	s.e.combineSends++
	return s.e.w.SendFrames(u, header, seqOff, lenOff, seq, data, frame)
}

func (s lockedSender) BufferedTo(ep engine.EP) uint64 { return s.e.BufferedTo(ep) }

// BufferedTo returns the payload bytes of sends on ep that UCX could not
// finish at once and still holds. ep must not be closed yet.
func (e *Engine) BufferedTo(ep engine.EP) uint64 {
	u, err := uep(ep)
	if err != nil {
		return 0
	}
	return e.w.Buffered(u)
}

// Queued tells the engine that the handler queued frames (engine.Combiner).
// They are sent now if the worker is free (but for backed-up endpoints),
// else by whoever holds the worker next; those for backed-up endpoints
// once they have caught up, or after maxQueueWait.
func (e *Engine) Queued() {
	e.fresh.Store(true)
	e.queued.Store(true)
	if e.mu.TryLock() {
		e.unlock()
	}
	e.kick()
}

// SendQueued sends what the handler queued now, whether or not UCX is
// backed up, waiting for the worker if another goroutine holds it.
func (e *Engine) SendQueued() error {
	return e.locked(func(*cucx.Worker) error { return nil })
}

// Buffered returns the payload bytes in C-owned send buffers that UCX has
// not finished sending, as of the last call into UCX.
func (e *Engine) Buffered() uint64 { return e.buffered.Load() }

// Pause stops the engine — progress and every call into UCX — until
// resume is called: a peer whose process is stopped, for tests.
func (e *Engine) Pause() (resume func()) {
	e.mu.Lock()
	return e.mu.Unlock
}

// errNotOurs is returned for an endpoint some other engine made.
var errNotOurs = errors.New("progress: not an endpoint of this engine")

// uep returns ep's UCX endpoint.
func uep(ep engine.EP) (cucx.EP, error) {
	u, ok := ep.Handle().(cucx.EP)
	if !ok || !u.Valid() {
		return cucx.EP{}, errNotOurs
	}
	return u, nil
}

// Connect creates an endpoint to the worker at addr, which is validated
// first (cucx.ValidateAddress): UCX aborts the process on a malformed one.
func (e *Engine) Connect(addr []byte) (engine.EP, error) {
	var u cucx.EP
	err := e.do(func(w *cucx.Worker) (err error) {
		u, err = w.Connect(addr)
		return err
	})
	if err != nil {
		return engine.EP{}, err
	}
	return engine.NewEP(u), nil
}

// CloseEP starts closing ep (see cucx.Worker.CloseEP).
func (e *Engine) CloseEP(ep engine.EP, force bool) error {
	u, err := uep(ep)
	if err != nil {
		return err
	}
	return e.do(func(w *cucx.Worker) error { return w.CloseEP(u, force) })
}

// Flush starts flushing ep. done reports that it finished at once;
// otherwise the Handler receives a Done event carrying token.
func (e *Engine) Flush(ep engine.EP, token uint64) (done bool, err error) {
	u, err := uep(ep)
	if err != nil {
		return false, err
	}
	err = e.do(func(w *cucx.Worker) error {
		done, err = w.Flush(u, token)
		return err
	})
	return done, err
}

// Transports names the UCX transports and devices carrying ep, e.g.
// "posix/memory" or "tcp/lo" (from ucp_ep_print_info).
func (e *Engine) Transports(ep engine.EP) []string {
	u, err := uep(ep)
	if err != nil {
		return nil
	}
	var info string
	_ = e.do(func(w *cucx.Worker) error {
		info = w.EPInfo(u)
		return nil
	})
	return cucx.Transports(info)
}

// Send sends one frame (see cucx.Worker.Send).
func (e *Engine) Send(ep engine.EP, header, data []byte) error {
	u, err := uep(ep)
	if err != nil {
		return err
	}
	return e.doSend(func(w *cucx.Worker) error {
		_, err := w.Send(u, header, data)
		return err
	})
}

// SendFrames sends data as consecutive frames (see cucx.Worker.SendFrames).
func (e *Engine) SendFrames(ep engine.EP, header []byte, seqOff, lenOff int, seq uint64, data []byte, frame int) (sent int, pending bool, err error) {
	u, err := uep(ep)
	if err != nil {
		return 0, false, err
	}
	err = e.doSend(func(w *cucx.Worker) error {
		sent, pending, err = w.SendFrames(u, header, seqOff, lenOff, seq, data, frame)
		return err
	})
	return sent, pending, err
}

// SendFramesZC sends data as consecutive frames from the caller's pinned
// memory (see cucx.Worker.SendFramesZC). wait means a Done event carrying
// token will report when UCX is done with data.
func (e *Engine) SendFramesZC(ep engine.EP, header []byte, seqOff, lenOff int, seq uint64, data []byte, frame int, token uint64) (sent int, wait bool, err error) {
	u, err := uep(ep)
	if err != nil {
		return 0, false, err
	}
	err = e.doSend(func(w *cucx.Worker) error {
		sent, wait, err = w.SendFramesZC(u, header, seqOff, lenOff, seq, data, frame, token)
		return err
	})
	return sent, wait, err
}

// TrySendFrames is SendFrames if no other goroutine holds the worker;
// ok = false means one does, and nothing was sent.
func (e *Engine) TrySendFrames(ep engine.EP, header []byte, seqOff, lenOff int, seq uint64, data []byte, frame int) (sent int, pending, ok bool, err error) {
	u, err := uep(ep)
	if err != nil {
		return 0, false, true, err
	}
	if !e.mu.TryLock() {
		return 0, false, false, nil
	}
	if e.closed {
		e.mu.Unlock()
		return 0, false, true, ErrClosed
	}
	e.combineLocked(false) // what others queued (this conn has none: it would have appended)
	sent, pending, err = e.w.SendFrames(u, header, seqOff, lenOff, seq, data, frame)
	e.noteStats(e.w.Stats())
	e.unlock()
	e.sent()
	return sent, pending, true, err
}

// markHeld tells the worker which events of the batch the handler held.
// It takes the lock: the handler may have called into UCX, and UCX may
// have recorded events (growing the C array) meanwhile.
func (e *Engine) markHeld(evs []cucx.Event) {
	e.lockLoop()
	e.w.MarkHeld(evs)
	e.unlock()
}

// Stats returns the engine's counters.
func (e *Engine) Stats() engine.Stats {
	var cs cucx.Stats
	_ = e.locked(func(w *cucx.Worker) error {
		cs = w.Stats()
		return nil
	})
	return engine.Stats{
		Inflight: cs.Inflight, InflightBytes: cs.InflightBytes, ZCFrames: cs.ZCFrames, ImmSends: cs.ImmSends,
		Wakeups: e.wakeups.Load(), Batches: e.batches.Load(),
	}
}

// sent records a submission that UCX took. Between requests spaced in
// time (the engine's last wake came after a quiet spell: quiet) it wakes a
// sleeping engine only when UCX holds operations that only progress
// advances (sends it could not finish at once, flushes, closes) or frames
// wait in the handler's queue: a send UCX finished needs no engine pass,
// and the reply it asks for wakes the engine through the event fd. (Waking
// it anyway cost a thread wake-up and a spin on the sender's side of every
// request after idle.) In a conversation the send wakes it as before, so
// that it spins for the reply: otherwise a ping-pong whose engine once fell
// asleep would pay a wake-up for every reply.
func (e *Engine) sent() {
	if e.quiet.Load() && e.inflight.Load() == 0 && !e.queued.Load() {
		e.submits.Add(1)
		return
	}
	e.kick()
}

// kick records a submission and wakes the engine if it sleeps.
func (e *Engine) kick() {
	e.submits.Add(1)
	if e.armed.CompareAndSwap(true, false) {
		e.mu.Lock()
		if !e.closed {
			_ = e.w.Signal()
		}
		e.mu.Unlock()
	}
}

func (e *Engine) loop() {
	defer close(e.done)
	evs := make([]cucx.Event, 0, e.cfg.MaxBatch)
	fds := []unix.PollFd{{Fd: int32(e.w.EventFD()), Events: unix.POLLIN}}
	last := time.Now()
	seen := e.submits.Load()
	// After a bulk frame the spin may be longer than cfg.Spin (spin.go).
	// It never exceeds the idle timeout, whose wake-ups shrink it.
	bs := newBulkSpin(e.cfg.Spin, min(e.cfg.SpinMax, e.cfg.IdleTimeout))
	ticker, _ := e.h.(engine.Ticker)
	lastTick := last
	var queuedSince time.Time // when queued frames were first seen waiting
	sporadic := false         // the last wake came after a long sleep: no spin
	// now is read once per pass, after the progress call (a clock read
	// is a measurable part of a spinning pass); the tick uses the last
	// pass's.
	now := last
	for !e.stopping.Load() {
		tick := now.Sub(lastTick) >= engine.TickEvery
		if tick {
			lastTick = now
			if ticker != nil {
				ticker.Tick(now)
			}
		}
		var n int
		rel := e.takeReleases()
		e.lockLoop()
		evs, n = e.w.Progress(evs[:0], e.cfg.MaxBatch, rel)
		st := e.w.Stats()
		e.noteStats(st)
		if tick {
			e.trimPool(st, now)
		}
		e.unlock()
		bulk := false
		if len(evs) > 0 {
			bulk = bulkBatch(evs)
			e.batches.Add(1)
			e.h.HandleEvents(evs)
			e.markHeld(evs)
			clear(evs) // drop references to C memory
			if sporadic {
				// Let the readers the batch readied run on this P now,
				// before this goroutine's progress and arm: their reply
				// goes out a pass earlier.
				runtime.Gosched()
			}
		}
		// Frames queued while UCX is backed up wait for it to catch up
		// (combineLocked), but not for long: one peer that stopped
		// draining would hold back the frames to every other peer.
		now = time.Now()
		if e.queued.Load() {
			if queuedSince.IsZero() {
				queuedSince = now
			} else if now.Sub(queuedSince) >= maxQueueWait {
				e.lock() // forces them out
				e.unlock()
				queuedSince = time.Time{}
			}
		} else {
			queuedSince = time.Time{}
		}
		// Activity — frames in, or sends out — restarts the spin window.
		// UCX's own progress count (n) is not activity: its timers and
		// keepalives would keep an idle engine spinning.
		if s := e.submits.Load(); len(evs) > 0 || s != seen {
			seen = s
			last = now
			if bulk {
				bs.frame(last)
			}
			continue
		}
		if !sporadic && now.Sub(last) < e.cfg.Spin || bs.spinning(now) {
			if n == 0 {
				runtime.Gosched()
			}
			continue
		}
		if bs.judge(now) {
			continue // the window may have grown
		}
		if e.queued.Load() {
			runtime.Gosched()
			continue // not asleep while frames wait (see maxQueueWait)
		}
		slept, ready := e.sleep(fds)
		if !slept {
			continue
		}
		e.wakeups.Add(1)
		bs.woke()
		woke := time.Now()
		if !ready {
			// The backstop: no activity, nothing to spin for.
			sporadic = true
			e.quiet.Store(true)
			continue
		}
		// Traffic that came soon after the last activity (last) is a
		// conversation: spin after it, as after any activity, so that the
		// next frame finds the engine awake. Traffic after a longer quiet
		// spell (sporadicGap) is requests spaced in time:
		// handle what came, then sleep again at once. A spin after those
		// buys nothing (the next request comes later than any spin) and
		// takes a CPU from the reader and the peer: on 2 vCPUs a 64 B
		// request after 1 ms idle took ~120 µs with the spin against
		// ~80 µs without. The gap is counted from the last activity, not
		// from the start of the sleep: round trips slowed by a sleep
		// (~70 µs) must still count as a conversation, or a ping-pong that
		// once slept would never spin again.
		sporadic = woke.Sub(last) >= sporadicGap(e.cfg.Spin)
		e.quiet.Store(sporadic)
		last = woke
	}
}

// sleep arms the worker and sleeps in poll(2) until its event fd is
// readable or the sleep's timeout passes. slept is false when the engine
// must not sleep (work is pending); ready reports a wake by the fd (traffic
// or a signal), not by the timeout.
//
// Parking in Go's netpoller instead (a RawConn on a dup of the fd) was
// tried again: with UCX_TLS=tcp it lost wake-ups (gRPC calls paced at
// 1,000/s had a p99 of 100 ms, the backstop, in 3 runs of 3; poll(2) never
// did), and over sm it bought nothing measurable.
func (e *Engine) sleep(fds []unix.PollFd) (slept, ready bool) {
	d := e.arm()
	if d <= 0 {
		return false, false
	}
	var n int
	for {
		var err error
		n, err = unix.Poll(fds, int(d/time.Millisecond))
		if err != unix.EINTR {
			break
		}
	}
	e.armed.Store(false)
	return true, n > 0
}

// arm arms the worker for a sleep and returns how long the sleep may last,
// or 0 when the engine must not sleep: UCX has work, or a submission,
// queued frames or Close came in meanwhile.
func (e *Engine) arm() time.Duration {
	seq := e.submits.Load()
	e.lockLoop()
	busy, err := e.w.Arm()
	pending := e.w.Stats().Inflight > 0
	e.unlock()
	if busy || err != nil {
		return 0
	}
	// Sends UCX could not start (a full shared-memory FIFO, a full
	// socket) are retried only by progress, and freed room at the peer
	// does not wake an armed worker: while any are pending, sleep at
	// most pendingPoll, not the idle backstop. (Without this a stream
	// that filled the FIFO stalled until the peer's next WINDOW frame
	// or the 100 ms backstop: 64 KiB-1 MiB streams fell from 13-16 to
	// 2-5 GB/s in one run of two.)
	wait := e.cfg.IdleTimeout
	if pending {
		wait = pendingPoll
	}
	e.armed.Store(true)
	if e.submits.Load() != seq || e.stopping.Load() || e.queued.Load() {
		e.armed.Store(false)
		return 0
	}
	return wait
}

// Close stops the engine goroutine, gives UCX up to linger to finish what
// it still owns (queued sends, endpoint closes), then destroys the worker.
// The caller closes its endpoints first.
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
	var evs []cucx.Event
	for {
		rel := e.takeReleases()
		e.mu.Lock()
		evs, _ = e.w.Progress(evs[:0], e.cfg.MaxBatch, rel)
		inflight := e.w.Stats().Inflight
		e.mu.Unlock()
		if len(evs) > 0 {
			e.h.HandleEvents(evs)
			e.markHeld(evs)
			clear(evs)
		}
		if inflight == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Microsecond)
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

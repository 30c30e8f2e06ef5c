package progress

// The engine goroutine: progress, event batches, spin and sleep.

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ucxnet/ucxnet/internal/cucx"
	"github.com/ucxnet/ucxnet/internal/engine"
)

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

// markHeld tells the worker which events of the batch the handler held.
// It takes the lock: the handler may have called into UCX, and UCX may
// have recorded events (growing the C array) meanwhile.
func (e *Engine) markHeld(evs []cucx.Event) {
	e.mu.Lock()
	e.w.MarkHeld(evs)
	e.mu.Unlock()
}

// pass is one progress call and the batch it brings, with the engine's
// own events (Tick, Writable) after UCX's. It returns the events that
// came from UCX (0: none), whether one was a bulk frame, and UCX's
// progress count.
func (e *Engine) pass(evs []cucx.Event, tick bool, now time.Time) (out []cucx.Event, got int, bulk bool, n int) {
	rel := e.takeReleases()
	e.mu.Lock()
	evs, n = e.w.Progress(evs[:0], e.cfg.MaxBatch, rel)
	st := e.w.Stats()
	e.noteStats(st)
	if tick {
		e.trimPool(st, now)
	}
	e.mu.Unlock()
	got = len(evs)
	if tick {
		evs = append(evs, engine.Event{Kind: engine.Tick})
	}
	// Writable: sends UCX held copies of completed, or an Acquire(false)
	// found the worker held (by this goroutine, say) since the last one.
	if wanted := e.wanted.Swap(false); wanted || st.BufferedDone != e.doneSeen {
		e.doneSeen = st.BufferedDone
		evs = append(evs, engine.Event{Kind: engine.Writable})
	}
	if len(evs) == 0 {
		return evs, 0, false, n
	}
	if got > 0 {
		bulk = bulkBatch(evs[:got])
		e.batches.Add(1)
	}
	e.h.HandleEvents(evs)
	if got > 0 {
		e.markHeld(evs[:got])
	}
	clear(evs) // drop references to C memory
	return evs, got, bulk, n
}

// loopState is the engine goroutine's bookkeeping between passes.
type loopState struct {
	evs      []cucx.Event
	fds      []unix.PollFd
	last     time.Time // the last activity
	seen     uint64    // submits as of the last pass
	lastTick time.Time
	bs       bulkSpin
	sporadic bool // the last wake came after a long sleep: no spin
	// now is read once per pass, after the progress call (a clock read
	// is a measurable part of a spinning pass); the tick uses the last
	// pass's.
	now time.Time
}

func (e *Engine) loop() {
	defer close(e.done)
	now := time.Now()
	s := &loopState{
		evs:  make([]cucx.Event, 0, e.cfg.MaxBatch+2),
		fds:  []unix.PollFd{{Fd: int32(e.w.EventFD()), Events: unix.POLLIN}},
		last: now, lastTick: now, now: now, seen: e.submits.Load(),
		// After a bulk frame the spin may be longer than cfg.Spin. It
		// never exceeds the idle timeout, whose wake-ups shrink it.
		bs: newBulkSpin(e.cfg.Spin, min(e.cfg.SpinMax, e.cfg.IdleTimeout)),
	}
	for !e.stopping.Load() {
		e.step(s)
	}
}

// step is one round of the engine goroutine: a pass, then spin or sleep.
func (e *Engine) step(s *loopState) {
	tick := s.now.Sub(s.lastTick) >= engine.TickEvery
	if tick {
		s.lastTick = s.now
	}
	var got, n int
	var bulk bool
	s.evs, got, bulk, n = e.pass(s.evs, tick, s.now)
	if got > 0 && s.sporadic {
		// Let the readers the batch readied run on this P now, before
		// this goroutine's progress and arm: their reply goes out a pass
		// earlier.
		runtime.Gosched()
	}
	now := time.Now()
	s.now = now
	// Activity — frames in, or sends out — restarts the spin window.
	// UCX's own progress count (n) is not activity: its timers and
	// keepalives would keep an idle engine spinning.
	if sub := e.submits.Load(); got > 0 || sub != s.seen {
		s.seen = sub
		s.last = now
		if bulk {
			s.bs.frame(now)
		}
		return
	}
	if !s.sporadic && now.Sub(s.last) < e.cfg.Spin || s.bs.spinning(now) {
		if n == 0 {
			runtime.Gosched()
		}
		return
	}
	if s.bs.judge(now) {
		return // the window may have grown
	}
	slept, ready := e.sleep(s.fds)
	if !slept {
		return
	}
	e.wakeups.Add(1)
	s.bs.woke()
	e.woke(s, ready)
}

// woke judges a wake from sleep: by the fd (ready: traffic or a signal)
// or by the timeout.
func (e *Engine) woke(s *loopState, ready bool) {
	woke := time.Now()
	if !ready {
		// The backstop: no activity, nothing to spin for.
		s.sporadic = true
		e.quiet.Store(true)
		return
	}
	// Traffic that came soon after the last activity (last) is a
	// conversation: spin after it, as after any activity, so that the
	// next frame finds the engine awake. Traffic after a longer quiet
	// spell (sporadicGap) is requests spaced in time: handle what came,
	// then sleep again at once. A spin after those buys nothing (the next
	// request comes later than any spin) and takes a CPU from the reader
	// and the peer: on 2 vCPUs a 64 B request after 1 ms idle took
	// ~120 µs with the spin against ~80 µs without. The gap is counted
	// from the last activity, not from the start of the sleep: round
	// trips slowed by a sleep (~70 µs) must still count as a
	// conversation, or a ping-pong that once slept would never spin again.
	s.sporadic = woke.Sub(s.last) >= sporadicGap(e.cfg.Spin)
	e.quiet.Store(s.sporadic)
	s.last = woke
}

// sleep arms the worker and sleeps in poll(2) until its event fd is
// readable or the sleep's timeout passes. slept is false when the engine
// must not sleep (work is pending); ready reports a wake by the fd (traffic
// or a signal), not by the timeout.
//
// poll(2) is level-triggered, which the worker's event fd needs: UCX's
// tcp transport arms as a no-op (whatever its sockets still hold), so after
// a progress call that read a frame in part the fd stays readable with no
// new edge. Go's netpoller, edge-triggered, parked on a dup of the fd then
// waits for the next packet or the backstop: a 256 KiB request every 1 ms
// over UCX_TLS=tcp, the receiver arming after any progress call, waited
// for a 100 ms backstop in 394 of 399 requests; with a zero-timeout
// poll(2) on the fd just before parking, in none. That check belongs in
// the first callback of RawConn.Read, not before the Read: internal/poll
// resets the descriptor's readiness before that callback (prepareRead), so
// an edge between an earlier check and the Read is forgotten.
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
// a Writable event owed or Close came in meanwhile.
func (e *Engine) arm() time.Duration {
	seq := e.submits.Load()
	e.mu.Lock()
	busy, err := e.w.Arm()
	pending := e.w.Stats().Inflight > 0
	e.mu.Unlock()
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
	if e.submits.Load() != seq || e.stopping.Load() || e.wanted.Load() {
		e.armed.Store(false)
		return 0
	}
	return wait
}

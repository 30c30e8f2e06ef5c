package progress

// The worker's lock: Acquire, the Worker it hands out, and the wake-up
// rules for what a holder submitted.

import (
	"errors"

	"github.com/ucxnet/ucxnet/internal/cucx"
	"github.com/ucxnet/ucxnet/internal/engine"
)

// Acquire takes the worker (see engine.Engine.Acquire). Without wait it
// returns nil if another goroutine holds it, and the engine owes its
// Handler a Writable event once it is given back.
func (e *Engine) Acquire(wait bool) engine.Worker {
	if wait {
		e.mu.Lock()
		return &e.wk
	}
	if e.mu.TryLock() {
		return &e.wk
	}
	// Set before the second try: a holder that lets go after it sees the
	// flag (giveBack), and one that let go before it leaves the lock free.
	e.wanted.Store(true)
	if e.mu.TryLock() {
		return &e.wk
	}
	return nil
}

// worker is the engine.Worker of whoever holds e.mu. Its fields are
// guarded by e.mu.
type worker struct {
	e *Engine
	// kick: an operation that only progress finishes (a connect, flush
	// or close) was started; sent: a send was made.
	kick, sent bool
}

var _ engine.Worker = (*worker)(nil)

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
func (k *worker) Connect(addr []byte) (engine.EP, error) {
	e := k.e
	if e.closed {
		return engine.EP{}, ErrClosed
	}
	u, err := e.w.Connect(addr)
	k.kick = true
	if err != nil {
		return engine.EP{}, err
	}
	e.learnTransports(u)
	return engine.NewEP(u), nil
}

// CloseEP starts closing ep (see cucx.Worker.CloseEP).
func (k *worker) CloseEP(ep engine.EP, force bool) error {
	e := k.e
	u, err := uep(ep)
	if err != nil {
		return err
	}
	if e.closed {
		return ErrClosed
	}
	e.transports.Delete(u)
	k.kick = true
	return e.w.CloseEP(u, force)
}

// Flush starts flushing ep. done reports that it finished at once;
// otherwise the Handler receives a Done event carrying token.
func (k *worker) Flush(ep engine.EP, token uint64) (done bool, err error) {
	e := k.e
	u, err := uep(ep)
	if err != nil {
		return false, err
	}
	if e.closed {
		return false, ErrClosed
	}
	k.kick = true
	return e.w.Flush(u, token)
}

// Send sends f on ep: one frame (see cucx.Worker.Send), consecutive frames
// copied (cucx.Worker.SendFrames) or from f.Data's pinned memory
// (cucx.Worker.SendFramesZC).
func (k *worker) Send(ep engine.EP, f engine.Frames) (sent int, pending bool, err error) {
	e := k.e
	u, err := uep(ep)
	if err != nil {
		return 0, false, err
	}
	if e.closed {
		return 0, false, ErrClosed
	}
	k.sent = true
	switch {
	case f.ZeroCopy:
		return e.w.SendFramesZC(u, f.Header, f.SeqOff, f.LenOff, f.Seq, f.Data, f.Frame, f.Token)
	case f.Frame > 0:
		return e.w.SendFrames(u, f.Header, f.SeqOff, f.LenOff, f.Seq, f.Data, f.Frame)
	}
	pending, err = e.w.Send(u, f.Header, f.Data)
	if err != nil {
		return 0, false, err
	}
	return len(f.Data), pending, nil
}

// GiveBack lets the worker go and wakes the engine for what the holder
// left UCX to do (see sent), or for a Writable event owed to the Handler.
func (k *worker) GiveBack() {
	e := k.e
	kick, sent := k.kick, k.sent
	k.kick, k.sent = false, false
	if (kick || sent) && !e.closed {
		e.noteStats(e.w.Stats())
	}
	e.mu.Unlock()
	switch {
	case kick || e.wanted.Load():
		e.kick()
	case sent:
		e.sent()
	}
}

// unlock lets the worker go for a holder that took e.mu without a Worker
// (Stats learning transports, Pause's resume): a writer whose
// Acquire(false) failed meanwhile is owed a Writable event, and a sleeping
// engine is woken for it, as GiveBack does.
func (e *Engine) unlock() {
	e.mu.Unlock()
	if e.wanted.Load() {
		e.kick()
	}
}

// sent records a submission that UCX took. Between requests spaced in
// time (the engine's last wake came after a quiet spell: quiet) it wakes a
// sleeping engine only when UCX holds operations that only progress
// advances (sends it could not finish at once, flushes, closes): a send
// UCX finished needs no engine pass, and the reply it asks for wakes the
// engine through the event fd. (Waking it anyway cost a thread wake-up and
// a spin on the sender's side of every request after idle.) In a
// conversation the send wakes it as before, so that it spins for the
// reply: otherwise a ping-pong whose engine once fell asleep would pay a
// wake-up for every reply.
func (e *Engine) sent() {
	if e.quiet.Load() && e.inflight.Load() == 0 {
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

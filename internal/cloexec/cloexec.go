// Package cloexec marks close-on-exec the descriptors that a C library
// (UCX) creates without it, so that a child the application execs does not
// inherit them.
//
// UCX creates its sockets, epoll instances and timerfds without
// close-on-exec (up to 1.22 only its eventfds have it); Go sets it on every
// descriptor of its own. A child the application execs (os/exec) would
// inherit UCX's tcp sockets and keep them open after this process dies, so
// that its peers learn of the death only from keepalive, and it would hold
// UCX's epoll and listening sockets for as long as it lives.
//
// A sweep (Linux) marks FD_CLOEXEC on every descriptor above 2 that lacks
// it and is a socket or an epoll, eventfd or timerfd instance: it reads
// /proc/self/fd, asks F_GETFD of each descriptor, and looks closer (fstat,
// readlink) only at the rare ones without the flag. Pipes and files are
// left alone: an application may mean a child to inherit those. Elsewhere
// a Sweeper does nothing.
package cloexec

import (
	"sync"
	"time"
)

// Sweeper throttles and runs the sweeps of one process (descriptors are
// per process: one Sweeper serves every user of the library). Its methods
// are safe for concurrent use.
type Sweeper struct {
	mu    sync.Mutex
	off   bool
	until time.Time     // ticks sweep until then
	last  time.Time     // when the last sweep started
	cost  time.Duration // how long it took
	buf   []byte        // getdents buffer
}

// sweepSpacing is how many times a sweep's cost the next one waits (so
// sweeps take at most 2% of a core); sweepWindow is how long after a
// Request the Ticks sweep. Otherwise the Ticks sweep every sweepIdle, or
// idleSpacing times a sweep's cost if that is longer (at most 0.2% of a
// core), for the descriptors the library makes on its own: UCX's async
// thread accepts every tcp connection made to its port, a ucxnet peer's
// or a stranger's that never says a word.
const (
	sweepSpacing = 50
	sweepWindow  = time.Second
	sweepIdle    = time.Second
	idleSpacing  = 500
)

// New returns a Sweeper; off (or a platform without sweeps) makes every
// call a no-op.
func New(off bool) *Sweeper { return &Sweeper{off: off || !supported} }

// Request asks for a sweep now, unless the last one was too recent, and
// at the Ticks of the next second: the library makes more descriptors
// while it finishes what it started (an endpoint's wire-up).
func (s *Sweeper) Request() {
	if s.off {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.until = now.Add(sweepWindow)
	if now.Sub(s.last) >= s.cost*sweepSpacing {
		s.sweepLocked(now)
	}
}

// Sweep sweeps now, however recent the last sweep, unless one that
// started after this call did (a caller waiting for another's sweep shares
// it), and asks the Ticks of the next second to sweep too. On return no
// descriptor that existed when Sweep was called lacks close-on-exec (of
// the kinds the sweep marks). Call it before handing the application
// something it may follow with an exec.
func (s *Sweeper) Sweep() {
	if s.off {
		return
	}
	called := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.until = called.Add(sweepWindow)
	if !s.last.After(called) {
		s.sweepLocked(time.Now())
	}
}

// Tick sweeps if a Request asked for it within the last second and the
// last sweep is far enough back, or if none ran for a second (or 500 times
// a sweep's cost). Call it on a periodic wake-up.
func (s *Sweeper) Tick(now time.Time) {
	if s.off {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	since := now.Sub(s.last)
	requested := now.Before(s.until) && since >= s.cost*sweepSpacing
	if requested || since >= max(sweepIdle, s.cost*idleSpacing) {
		s.sweepLocked(now)
	}
}

// sweepLocked runs one sweep and records its cost. s.mu is held.
func (s *Sweeper) sweepLocked(start time.Time) {
	if s.buf == nil {
		s.buf = make([]byte, 16<<10)
	}
	markCloexec(s.buf)
	s.last = start
	s.cost = time.Since(start)
}

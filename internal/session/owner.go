package session

// Run-time checks of the ownership rules that doc.go states, after
// x/net/http2's serve loop (serveG.check): state owned by a shard's engine
// goroutine is touched there alone, and a ...Locked function runs with
// its lock held.
//
//   - A shard's handler (HandleEvents) marks the shard as owned by the
//     goroutine that runs it, for the length of the call; the functions
//     that read or write what that goroutine owns (engine goroutine of sh
//     only) call owner.check, which fails on any other goroutine and
//     outside the handler. Two goroutines in one shard's handler at once
//     fail too.
//   - A ...Locked function asserts its lock held (held,
//     heldW). Go's mutexes record no holder: the check is that a TryLock
//     fails, so it misses a lock held by another goroutine, but never
//     fails a caller that holds it.
//
// The checks run when checkOwners is set: UCXNET_DEBUG_OWNERS=1 in the
// environment, read once when the package is initialised; this package's
// tests set it unless the variable is 0. A broken rule panics with a
// message that names it. Off, each check costs one predictable branch on
// a package variable.

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
)

// envDebugOwners names the environment variable that turns the ownership
// checks on (1).
const envDebugOwners = "UCXNET_DEBUG_OWNERS"

// checkOwners turns the ownership checks on.
var checkOwners = os.Getenv(envDebugOwners) == "1"

// owner records which goroutine runs a shard's handler, for owner.check.
type owner struct {
	g        atomic.Uint64 // the goroutine in the handler; 0: none
	handlers atomic.Int32  // goroutines in the handler
	// mu is held by the goroutine in the handler, so that the package's
	// tests can run a shard's engine work on their own goroutine between
	// two calls of it.
	mu sync.Mutex
}

// enter marks the calling goroutine as the one in the shard's handler
// (checks on).
func (o *owner) enter() {
	if o.handlers.Add(1) != 1 {
		panic("ucxnet/session: a shard's HandleEvents entered while it runs (two engine goroutines, or a handler calling itself)")
	}
	o.mu.Lock()
	o.g.Store(goroutineID())
}

// exit ends what enter began.
func (o *owner) exit() {
	o.g.Store(0)
	o.mu.Unlock()
	o.handlers.Add(-1)
}

// check panics, if the checks are on, unless the calling goroutine is in
// the shard's handler.
func (o *owner) check() {
	if checkOwners {
		o.checkNow()
	}
}

// checkNow is check's test.
func (o *owner) checkNow() {
	if g, want := goroutineID(), o.g.Load(); g != want {
		where := fmt.Sprintf("goroutine %d is", want)
		if want == 0 {
			where = "no goroutine is"
		}
		panic(fmt.Sprintf("ucxnet/session: running on the wrong goroutine: state owned by a shard's engine goroutine "+
			"touched on goroutine %d while %s in the shard's HandleEvents", g, where))
	}
}

// locker is a sync.Mutex or sync.RWMutex: held checks either.
type locker interface {
	TryLock() bool
	Unlock()
}

// held panics, if the checks are on, when mu (a sync.Mutex, or a
// sync.RWMutex held either way) is not locked.
func held(mu locker, rule string) {
	if checkOwners {
		heldNow(mu, rule)
	}
}

// heldNow is held's test.
func heldNow(mu locker, rule string) {
	if mu.TryLock() {
		mu.Unlock()
		panic("ucxnet/session: lock not held: " + rule)
	}
}

// heldW panics, if the checks are on, when mu is not write-locked. A
// read lock taken while no writer waits is caught; one taken while a
// writer waits passes (TryRLock fails then too).
func heldW(mu *sync.RWMutex, rule string) {
	if checkOwners {
		heldWNow(mu, rule)
	}
}

// heldWNow is heldW's test.
func heldWNow(mu *sync.RWMutex, rule string) {
	if mu.TryRLock() {
		mu.RUnlock()
		panic("ucxnet/session: write lock not held: " + rule)
	}
}

// goroutineID is the calling goroutine's id, read from the first line of
// its stack trace ("goroutine 7 [running]:"). It is slow (a traceback):
// only the checks call it.
func goroutineID() uint64 {
	var buf [64]byte
	b := bytes.TrimPrefix(buf[:runtime.Stack(buf[:], false)], []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		panic("ucxnet/session: cannot read the goroutine id from " + strconv.Quote(string(buf[:])))
	}
	return id
}

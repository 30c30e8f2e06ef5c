package session

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// asEngine runs f on the calling goroutine as s's engine goroutine, as the
// ownership checks see it: between two calls of s's handler, which waits
// meanwhile. Tests use it to run a shard's engine work (a keepalive
// sweep) at a time of their choosing.
func asEngine(s *shard, f func()) {
	s.owner.mu.Lock()
	s.owner.g.Store(goroutineID())
	defer func() {
		s.owner.g.Store(0)
		s.owner.mu.Unlock()
	}()
	f()
}

// needOwnerChecks skips t when the ownership checks are off.
func needOwnerChecks(t *testing.T) {
	t.Helper()
	if !checkOwners {
		t.Skip("the ownership checks are off (" + envDebugOwners + "=0)")
	}
}

// panicOf runs f on a goroutine of its own and returns what it panicked
// with ("" if it did not).
func panicOf(f func()) string {
	ch := make(chan string)
	go func() {
		defer func() {
			r := recover()
			if r == nil {
				ch <- ""
				return
			}
			ch <- fmt.Sprint(r)
		}()
		f()
	}()
	return <-ch
}

// State owned by a shard's engine goroutine is touched there alone: a
// guarded function fails outside the handler and on another goroutine
// than the one in it, and passes on that one.
func TestOwnerEngineGoroutine(t *testing.T) {
	needOwnerChecks(t)
	s := newShard(&Transport{}, 0)
	p := &peer{sh: s}
	now := time.Now().UnixNano()
	require.Contains(t, panicOf(func() { p.allowPong(now) }), "running on the wrong goroutine")

	in, left := make(chan struct{}), make(chan struct{})
	out := make(chan string)
	go func() {
		defer close(left) // after exit: the handler has been left
		s.owner.enter()
		defer s.owner.exit()
		close(in)
		out <- panicOf(func() { p.allowPong(now) }) // another goroutine
		out <- fmt.Sprint(p.allowPong(now))         // the handler's own
	}()
	<-in
	require.Contains(t, <-out, "running on the wrong goroutine")
	require.Equal(t, "true", <-out)
	<-left
	require.Contains(t, panicOf(func() { p.allowPong(now) }), "no goroutine is in the shard's HandleEvents")
}

// A running engine's shard: its keepalive sweep (tick) fails on a test's
// goroutine, and runs there as the engine's (asEngine).
func TestOwnerRunningEngine(t *testing.T) {
	needOwnerChecks(t)
	p := newMemPair(t, Config{})
	s := p.client.shards[0]
	require.Contains(t, panicOf(func() { s.sweep.tick(time.Now()) }), "running on the wrong goroutine")
	require.Empty(t, panicOf(func() { asEngine(s, func() { s.sweep.tick(time.Now()) }) }))
}

// Two goroutines in one shard's handler at once fail.
func TestOwnerHandlerEnteredTwice(t *testing.T) {
	needOwnerChecks(t)
	s := newShard(&Transport{}, 0)
	s.owner.enter()
	defer s.owner.exit()
	require.Contains(t, panicOf(func() { engineHandler{s}.HandleEvents(nil) }), "HandleEvents entered while it runs")
	s.owner.handlers.Add(-1) // the failed entry's count
}

// A ...Locked function fails without its lock and passes with it; a
// write-locked one fails under a read lock.
func TestOwnerLockHeld(t *testing.T) {
	needOwnerChecks(t)
	var mu sync.Mutex
	require.Contains(t, panicOf(func() { held(&mu, "rule") }), "lock not held: rule")
	mu.Lock()
	require.Empty(t, panicOf(func() { held(&mu, "rule") }))
	mu.Unlock()

	tr := &Transport{}
	require.Contains(t, panicOf(func() { tr.idlePeersLocked() }), "lock not held: idlePeersLocked needs Transport.mu")
	tr.mu.RLock()
	require.Empty(t, panicOf(func() { tr.idlePeersLocked() }))
	require.Contains(t, panicOf(func() { heldW(&tr.mu, "rule") }), "write lock not held: rule")
	tr.mu.RUnlock()
	tr.mu.Lock()
	require.Empty(t, panicOf(func() { heldW(&tr.mu, "rule") }))
	tr.mu.Unlock()
}

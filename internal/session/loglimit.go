package session

import (
	"sync"
	"time"
)

// HostileLogRate and HostileLogBurst bound the log records that a peer's
// input can cause (refused handshakes, dropped frames): a token bucket of
// HostileLogBurst records refilled at HostileLogRate per second. Records
// beyond it are counted and the count goes into the next one.
const (
	HostileLogRate  = 1
	HostileLogBurst = 10
)

// LogLimiter limits the log records a peer's input causes, and counts
// those it suppressed. Its zero value is ready; it is safe for concurrent
// use and its lock is a leaf.
type LogLimiter struct {
	mu         sync.Mutex
	b          Bucket
	suppressed uint64
}

// Allow takes a token at now; it returns false (counting the record) when
// none is left, else the records suppressed since the last one allowed.
func (l *LogLimiter) Allow(now time.Time) (ok bool, suppressed uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.b.Take(now, HostileLogBurst, HostileLogRate) {
		l.suppressed++
		return false, 0
	}
	s := l.suppressed
	l.suppressed = 0
	return true, s
}

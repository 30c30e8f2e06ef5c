package ucxnet

// Logging of the rare events to Config.Logger.

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ucxnet/ucxnet/internal/session"
)

// hostileLogRate and hostileLogBurst bound the log records that a peer's
// input can cause (refused handshakes, dropped frames): a token bucket of
// hostileLogBurst records refilled at hostileLogRate per second. Records
// beyond it are counted and the count goes into the next one.
const (
	hostileLogRate  = 1
	hostileLogBurst = 10
)

// logLimiter limits the records a peer's input causes, and counts those
// it suppressed.
type logLimiter struct {
	mu         sync.Mutex
	b          session.Bucket
	suppressed uint64
}

// allow takes a token; it returns false (counting the record) when none is
// left, else the records suppressed since the last one allowed.
func (l *logLimiter) allow(now time.Time) (ok bool, suppressed uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.b.Take(now, hostileLogBurst, hostileLogRate) {
		l.suppressed++
		return false, 0
	}
	s := l.suppressed
	l.suppressed = 0
	return true, s
}

// logEvent logs a rare event that this side's own state causes (a peer
// failing, a keepalive failure, a lane choice) at level, if a Logger is
// set. args are slog's key-value pairs.
func (t *Transport) logEvent(level slog.Level, msg string, args ...any) {
	lg := t.cfg.Logger
	if lg == nil || !lg.Enabled(context.Background(), level) {
		return
	}
	lg.Log(context.Background(), level, msg, append(args, "transport", t.name)...)
}

// logHostile logs, at warning level and rate-limited (so that a peer
// cannot flood the log), an event a peer's input caused: a refused
// handshake, a frame dropped as malformed or foreign. A record after
// suppressed ones says how many were suppressed.
func (t *Transport) logHostile(msg string, args ...any) {
	lg := t.cfg.Logger
	if lg == nil || !lg.Enabled(context.Background(), slog.LevelWarn) {
		return
	}
	ok, suppressed := t.logLimit.allow(time.Now())
	if !ok {
		return
	}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	lg.Warn(msg, append(args, "transport", t.name)...)
}

// authFailed counts a handshake refused for a wrong or missing
// pre-shared key, and logs it.
func (t *Transport) authFailed() {
	t.stats.authFailures.Add(1)
	t.logHostile("ucxnet: handshake refused: pre-shared key authentication failed")
}

// badFrame counts a frame dropped as malformed, and logs it.
func (t *Transport) badFrame() {
	t.stats.badFrames.Add(1)
	t.logHostile("ucxnet: dropped a malformed frame")
}

// foreignFrame counts a frame dropped because it came from another
// endpoint than its conn's, and logs it.
func (t *Transport) foreignFrame() {
	t.stats.foreignFrames.Add(1)
	t.logHostile("ucxnet: dropped a frame from another endpoint than its conn's")
}

// protocolReset counts a conn reset because its peer broke the protocol,
// and logs it.
func (t *Transport) protocolReset(c *Conn) {
	t.stats.protocolResets.Add(1)
	t.logHostile("ucxnet: reset a conn whose peer broke the protocol", "conn", c.laddr.String(), "peer", c.raddr.Name)
}

package session

// Logging of the rare events to Config.Logger.

import (
	"context"
	"log/slog"
	"time"
)

// eventLog logs a transport's rare events to its Config.Logger, and counts
// those a peer's input causes (in counters it shares with Stats).
type eventLog struct {
	lg    *slog.Logger // Config.Logger; nil: none
	name  string       // the transport's name, on every record
	limit LogLimiter   // the records a peer's input causes
	stats *counters
}

// event logs a rare event that this side's own state causes (a peer
// failing, a keepalive failure, a lane choice) at level, if a Logger is
// set. args are slog's key-value pairs.
func (l *eventLog) event(level slog.Level, msg string, args ...any) {
	lg := l.lg
	if lg == nil || !lg.Enabled(context.Background(), level) {
		return
	}
	lg.Log(context.Background(), level, msg, append(args, "transport", l.name)...)
}

// hostile logs, at warning level and rate-limited (so that a peer
// cannot flood the log), an event a peer's input caused: a refused
// handshake, a frame dropped as malformed or foreign. A record after
// suppressed ones says how many were suppressed.
func (l *eventLog) hostile(msg string, args ...any) {
	lg := l.lg
	if lg == nil || !lg.Enabled(context.Background(), slog.LevelWarn) {
		return
	}
	ok, suppressed := l.limit.Allow(time.Now())
	if !ok {
		return
	}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	lg.Warn(msg, append(args, "transport", l.name)...)
}

// authFailed counts a handshake refused for a wrong or missing
// pre-shared key, and logs it.
func (l *eventLog) authFailed() {
	l.stats.authFailures.Add(1)
	l.hostile("ucxnet: handshake refused: pre-shared key authentication failed")
}

// badFrame counts a frame dropped as malformed, and logs it.
func (l *eventLog) badFrame() {
	l.stats.badFrames.Add(1)
	l.hostile("ucxnet: dropped a malformed frame")
}

// foreignFrame counts a frame dropped because it came from another
// endpoint than its conn's, and logs it.
func (l *eventLog) foreignFrame() {
	l.stats.foreignFrames.Add(1)
	l.hostile("ucxnet: dropped a frame from another endpoint than its conn's")
}

// protocolReset counts a conn reset because its peer broke the protocol,
// and logs it.
func (l *eventLog) protocolReset(c *Conn) {
	l.stats.protocolResets.Add(1)
	l.hostile("ucxnet: reset a conn whose peer broke the protocol", "conn", c.laddr.String(), "peer", c.raddr.Name)
}

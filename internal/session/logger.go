package session

// Logging of the rare events to Config.Logger.

import (
	"context"
	"log/slog"
	"time"
)

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
	ok, suppressed := t.logLimit.Allow(time.Now())
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

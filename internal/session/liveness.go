package session

import (
	"net"
	"time"
)

// Verdict is what a keepalive sweep does about a peer with conns.
type Verdict int

// The verdicts.
const (
	Alive Verdict = iota // nothing: heard from lately, or probed lately
	Probe                // send it a PING
	Dead                 // fail it: its PINGs went unanswered
)

// KeepAlive is a conn's keepalive, shaped like TCP's (and with
// net.KeepAliveConfig's meaning): a peer silent for Idle is probed, again
// every Interval, and failed once Count probes went unanswered. Idle <= 0
// turns it off.
type KeepAlive struct {
	Idle, Interval time.Duration
	Count          int
}

// keepAliveOf is the keepalive that an idle time (Config.KeepAlive,
// Dialer.KeepAlive) sets, as net.Dialer.KeepAlive sets a socket's: probes
// every idle too, DefaultKeepAliveCount of them; <= 0: off.
func keepAliveOf(idle time.Duration) KeepAlive {
	if idle <= 0 {
		return KeepAlive{}
	}
	return KeepAlive{Idle: idle, Interval: idle, Count: DefaultKeepAliveCount}
}

// keepAliveConfig is the keepalive net.KeepAliveConfig c sets over base,
// as (*net.TCPConn).SetKeepAliveConfig does: a zero field keeps the
// default (DefaultKeepAlive, DefaultKeepAliveCount), a negative one too.
func keepAliveConfig(c net.KeepAliveConfig) KeepAlive {
	if !c.Enable {
		return KeepAlive{}
	}
	k := KeepAlive{Idle: c.Idle, Interval: c.Interval, Count: c.Count}
	if k.Idle <= 0 {
		k.Idle = DefaultKeepAlive
	}
	if k.Interval <= 0 {
		k.Interval = DefaultKeepAlive
	}
	if k.Count <= 0 {
		k.Count = DefaultKeepAliveCount
	}
	return k
}

// On reports whether k checks the peer at all.
func (k KeepAlive) On() bool { return k.Idle > 0 }

// Timeout is how long a peer may stay silent before it is failed:
// Idle and Count probes an Interval apart.
func (k KeepAlive) Timeout() time.Duration { return k.Idle + time.Duration(k.Count)*k.Interval }

// tightest is the stricter of k and o, field by field, among those on:
// a peer is judged by its conns' strictest keepalive.
func (k KeepAlive) tightest(o KeepAlive) KeepAlive {
	if !o.On() {
		return k
	}
	if !k.On() {
		return o
	}
	return KeepAlive{Idle: min(k.Idle, o.Idle), Interval: min(k.Interval, o.Interval), Count: min(k.Count, o.Count)}
}

// Liveness is what a keepalive sweep knows of a peer with conns.
type Liveness struct {
	KeepAlive KeepAlive // its conns' tightest keepalive (off: not checked)
	// Dialer: this side dialed some of its conns, and so probes first.
	Dialer bool
	// LastRecv is when a frame from the peer last arrived, LastPing when
	// this side last sent it a PING (zero: never).
	LastRecv, LastPing time.Time
}

// Judge judges a peer at now, as TCP's keepalive does: silent for Idle,
// it is probed, and again every Interval while no answer comes; silent
// for Idle and Count Intervals after a probe, it is dead. The side that
// did not dial waits half an Interval longer before its first probe, so
// that in steady state only the dialer probes (the answers are its signs
// of life, the PINGs the other side's). A peer is failed only after a
// PING sent after its last sign of life had a quarter Interval to be
// answered: a sweep that comes late must not fail a peer it never asked.
func Judge(l Liveness, now time.Time) Verdict {
	k := l.KeepAlive
	if !k.On() {
		return Alive
	}
	idle := k.Idle
	if !l.Dialer {
		idle += k.Interval / 2
	}
	silent := now.Sub(l.LastRecv)
	if silent <= idle {
		return Alive
	}
	probed := l.LastPing.After(l.LastRecv)
	sincePing := now.Sub(l.LastPing)
	switch {
	case probed && silent > idle+time.Duration(k.Count)*k.Interval && sincePing >= k.Interval/4:
		return Dead
	case !probed || sincePing >= k.Interval:
		return Probe
	}
	return Alive
}

// StallFloor is the earliest last sign of life a sweep counts after this
// process did not run for a while (stopped, a suspended VM): the peers'
// silence meanwhile says nothing, so it counts from Idle before now at
// most: each silent peer is probed at once and has its Count Intervals
// to answer.
func StallFloor(now time.Time, k KeepAlive) time.Time {
	return now.Add(-k.Idle - time.Millisecond)
}

// SetKeepAlive turns keepalives on (with the defaults, as
// (*net.TCPConn).SetKeepAlive does) or off for the conn; they are judged
// per peer, by the tightest keepalive of its conns. On the kernel-TCP
// lane it sets the socket's own.
func (c *Conn) SetKeepAlive(on bool) error {
	return c.SetKeepAliveConfig(net.KeepAliveConfig{Enable: on})
}

// SetKeepAliveConfig sets the conn's keepalive, as
// (*net.TCPConn).SetKeepAliveConfig does: Idle, Interval and Count, their
// defaults where zero or negative (see SetKeepAlive).
func (c *Conn) SetKeepAliveConfig(cfg net.KeepAliveConfig) error {
	c.mu.Lock()
	done := c.state.Closed || c.state.Phase == PhaseDone
	c.mu.Unlock()
	if done {
		return net.ErrClosed
	}
	t := c.t
	t.mu.Lock()
	defer t.mu.Unlock()
	c.keepAlive = keepAliveConfig(cfg)
	if p := c.peer(); p != nil && p.conns[c.id] == c {
		p.ka = KeepAlive{}
		for _, q := range p.conns {
			p.ka = p.ka.tightest(q.keepAlive)
		}
	}
	return nil
}

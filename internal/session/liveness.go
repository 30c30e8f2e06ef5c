package session

import "time"

// Verdict is what a keepalive sweep does about a peer with conns.
type Verdict int

// The verdicts.
const (
	Alive Verdict = iota // nothing: heard from lately, or probed lately
	Probe                // send it a PING
	Dead                 // fail it: a PING went unanswered
)

// Liveness is what a keepalive sweep knows of a peer with conns.
type Liveness struct {
	// KeepAlive is the shortest positive keepalive of its conns; <= 0:
	// keepalives are off for all of them.
	KeepAlive time.Duration
	// Dialer: this side dialed some of its conns, and so probes first.
	Dialer bool
	// LastRecv is when a frame from the peer last arrived, LastPing when
	// this side last sent it a PING (zero: never).
	LastRecv, LastPing time.Time
}

// Judge judges a peer at now. The side that dialed probes after half of
// KeepAlive; the other waits three quarters of it, so that in steady
// state only one side sends PINGs (the answers are signs of life for the
// prober, the PINGs for the other side) and idle conns cost half the
// wake-ups. A peer is dead only once a PING sent after its last sign of
// life went unanswered for an eighth of KeepAlive, and it has been silent
// for more than KeepAlive: a sweep that comes late (a busy engine, or a
// tick just short of due) must not fail a peer it never asked. An
// unanswered PING is repeated after a sixth of KeepAlive.
func Judge(l Liveness, now time.Time) Verdict {
	ka := l.KeepAlive
	if ka <= 0 {
		return Alive
	}
	probeAfter := ka * 3 / 4
	if l.Dialer {
		probeAfter = ka / 2
	}
	silent := now.Sub(l.LastRecv)
	if silent <= probeAfter {
		return Alive
	}
	probed := l.LastPing.After(l.LastRecv)
	sincePing := now.Sub(l.LastPing)
	switch {
	case silent > ka && probed && sincePing >= ka/8:
		return Dead
	case !probed || sincePing >= ka/6:
		return Probe
	}
	return Alive
}

// StallFloor is the earliest last sign of life a sweep counts after this
// process did not run for a while (stopped, a suspended VM): the peers'
// silence meanwhile says nothing, so it counts from half of keepAlive
// before now at most, and each silent peer is probed and has time to
// answer.
func StallFloor(now time.Time, keepAlive time.Duration) time.Time {
	return now.Add(-keepAlive/2 - time.Millisecond)
}

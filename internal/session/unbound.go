package session

import (
	"time"

	"github.com/ucxnet/ucxnet/internal/stream"
)

// Accepted conns that nothing binds. An accepted conn is bound by the
// first frame for it (learnFrom), and an honest dialer sends one at once
// (its AUTH, or a WINDOW). A conn made from a CONNECT that named another
// worker's address never gets one: the worker at that address answers
// its ACCEPT with an RST when it knows the endpoint the ACCEPT came from
// (unmatchedAccept), but not when it learns that endpoint only later; and
// the conn's peer may stay alive through honest conns. So an accepted
// conn still unbound after its KeepAlive is probed with a PING of its own
// (a dialer that sends nothing at once, as older ones do, answers it, and
// the answer binds the conn), and one still unbound after twice its
// KeepAlive is reset. Answers to PINGs for conns the receiver does not
// know (strayFrame) carry no Aux, and bind nothing.

// unboundLocked lists p's accepted conns still unbound at now: those to
// probe (once, past their KeepAlive) and those to reset (past twice it).
// t.mu is held; s's engine goroutine, which owns the conns' binding.
func unboundLocked(p *peer, now time.Time, probe, reset []*Conn) ([]*Conn, []*Conn) {
	heldW(&p.sh.t.mu, "unboundLocked needs Transport.mu")
	p.sh.owner.check()
	for _, c := range p.conns {
		if !c.learnFrom || c.from != 0 || !c.keepAlive.On() {
			continue
		}
		switch age := now.Sub(c.born); {
		case age > 2*c.keepAlive.Idle:
			reset = append(reset, c)
		case age > c.keepAlive.Idle && !c.unboundProbed:
			c.unboundProbed = true
			probe = append(probe, c)
		}
	}
	return probe, reset
}

// strayPong reports whether h answers a PING for a conn its sender did
// not know (strayFrame): such an answer binds no conn.
func strayPong(h stream.Header) bool {
	return h.Kind == stream.KindPing && h.Flags&stream.FlagReply != 0 && h.Aux == 0
}

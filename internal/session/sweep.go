package session

// The keepalive sweep: each shard's engine goroutine judges its peers'
// silence on its ticks (liveness.go has the judgement), probes the silent
// ones, fails those that left their probes unanswered and closes idle
// endpoints.

import (
	"fmt"
	"time"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// sweep is a shard's keepalive sweep. Owned by the shard's engine
// goroutine.
type sweep struct {
	sh   *shard
	last time.Time // when it last ran
}

// every is how often the keepalive sweep runs: a sixth of the
// transport's keepalive idle time, within [engine.TickEvery, 1 s].
func (w *sweep) every() time.Duration {
	t := w.sh.t
	every := 250 * time.Millisecond // for conns whose Dialer, ListenConfig or SetKeepAlive sets a keepalive
	if ka := t.cfg.KeepAlive; ka > 0 {
		every = min(time.Second, max(ka/6, engine.TickEvery))
	}
	return every
}

// tick runs the sweep when it is due (its shard's engine goroutine, on its
// engine's Tick events: no timer of its own, which would wake an idle
// process more often). A tick far later than due means this process did not run
// (stopped, a suspended VM): its peers' silence says nothing yet.
func (w *sweep) tick(now time.Time) {
	s := w.sh
	s.owner.check()
	t := s.t
	every := w.every()
	if w.last.IsZero() {
		w.last = now
		return
	}
	// A tick a little early still runs it: ticks come every
	// engine.TickEvery with some jitter, and a sweep due every TickEvery
	// would otherwise run on every other one.
	if now.Sub(w.last) < every-every/8 {
		return
	}
	stalled := now.Sub(w.last) > 3*every
	w.last = now
	if t.isClosed() {
		return
	}
	w.once(now, stalled)
}

// once is one round of the sweep over its shard's peers. After a stall of this
// process (stalled), no peer is failed for the silence seen: each silent
// one is probed and has two thirds of KeepAlive to answer.
func (w *sweep) once(now time.Time, stalled bool) {
	s, t := w.sh, w.sh.t
	var probes []probe
	var dead, idle []*peer
	var unboundProbe, unboundReset []*Conn
	t.mu.Lock()
	for _, p := range s.peers {
		if len(p.conns) == 0 {
			grace := idlePeer
			if !p.hadConns {
				grace = idleRefusedPeer
			}
			if now.Sub(p.idleSince) > grace {
				s.forgetPeerLocked(p)
				idle = append(idle, p)
			}
			continue
		}
		unboundProbe, unboundReset = unboundLocked(p, now, unboundProbe, unboundReset)
		switch v, c := livenessLocked(p, now, stalled); v {
		case Probe:
			probes = append(probes, probe{p, c})
		case Dead:
			dead = append(dead, p)
		}
	}
	t.mu.Unlock()
	for _, p := range idle {
		t.stats.idleClosed.Add(1)
		p.closeEP(false)
	}
	w.sendProbes(probes, now)
	w.checkUnbound(unboundProbe, unboundReset)
	w.failSilent(dead, now)
}

// probe is a PING to send to p, on conn c.
type probe struct {
	p *peer
	c *Conn
}

// sendProbes sends the sweep's PINGs, sent at now.
func (w *sweep) sendProbes(probes []probe, now time.Time) {
	t := w.sh.t
	for _, pr := range probes {
		pr.p.lastPing.Store(now.UnixNano())
		pr.p.rttProbe.Store(now.UnixNano())
		t.stats.pingsSent.Add(1)
		// Aux names our end of the conn, for a peer that no longer
		// knows its own (strayFrame).
		_ = pr.p.sendCtl(stream.Header{Kind: stream.KindPing, ConnID: pr.c.loadRemoteID(), Aux: pr.c.id})
	}
}

// failSilent fails the peers that left their PINGs unanswered, unless a
// kernel channel says their process lives on this host (stopped, frozen
// or starved: TCP's kernel answers for such a process too).
func (w *sweep) failSilent(dead []*peer, now time.Time) {
	t := w.sh.t
	for _, p := range dead {
		if t.kc.alive(p.addr) {
			p.lastRecv.Store(now.UnixNano())
			t.stats.keepAliveKernel.Add(1)
			continue
		}
		t.stats.keepAliveFailures.Add(1)
		silent := now.Sub(time.Unix(0, p.lastRecv.Load())).Round(time.Millisecond)
		// Over TCP UCX may still think the endpoint healthy (a link that
		// is down), and UCX 1.13 can crash once a force-closed tcp
		// endpoint with sends in flight hears from its peer again: close
		// it gracefully there; UCX finishes or fails what it holds.
		// Elsewhere force the close, which also cancels sends that a dead
		// peer will never drain (zero-copy writers wait on those).
		force := p.path(t).Kind != PathTCP
		p.failClose(fmt.Sprintf("no answer to keepalive for %v", silent), force)
	}
}

// checkUnbound probes and resets the conns unboundLocked listed.
func (w *sweep) checkUnbound(probe, reset []*Conn) {
	t := w.sh.t
	for _, c := range probe {
		t.stats.pingsSent.Add(1)
		_ = c.peer().sendCtl(stream.Header{Kind: stream.KindPing, ConnID: c.remoteID, Aux: c.id})
	}
	for _, c := range reset {
		c.terminate(withDetail(ErrReset, "the dialer sent nothing for the conn within twice KeepAlive (%v)", 2*c.keepAlive.Idle),
			EndReset(stream.RstAbort, RSTAlways))
	}
}

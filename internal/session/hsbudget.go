package session

// The budget for unproven handshakes. A CONNECT to a keyed listener costs
// the listener an X25519 multiplication (its CPace share) and a conn that
// waits for the dialer's proof; one that never proves costs that for
// nothing. Such CONNECTs are taken within a budget before any of it is
// spent: each sending endpoint (Event.From: UCX's, not the sender's word)
// has a small share, all of them together a larger one, and an endpoint
// that proved the key before has a share of its own, so that a flood of
// unproven CONNECTs from many workers cannot keep a proven peer out. An
// honest dialer proves within a round trip and, once proven, dials from
// its own share; a CONNECT over the budget gets no answer, and the
// dialer sends it again (resend.go).

import (
	"sync"
	"time"
)

const (
	unprovenBurst, unprovenRate = 128, 128 // all endpoints that never proved, per Transport
	senderBurst, senderRate     = 8, 2     // one endpoint that never proved
	// One endpoint that proved: no more at once than a dialing worker may
	// have waiting for their proofs (maxPendingAuthPerPeer; beyond it the
	// oldest would be dropped), and then its own rate.
	provenBurst, provenRate = maxPendingAuthPerPeer, 256
	maxHandshakeSenders     = 4096 // endpoints whose budget is kept
	maxProvenSenders        = 1024 // of them, endpoints that proved
	// CONNECTs one endpoint that never proved may send over its budget
	// before it is taken for a flooder: an honest dialer resends a
	// CONNECT that got no answer 200 ms later, then less and less often
	// (resend.go), and a pool opening many conns at once through a fresh
	// endpoint sends one CONNECT each.
	overBurst, overRate = 256, 64
)

// handshakeBudget is a Transport's budget for unproven handshakes.
type handshakeBudget struct {
	mu      sync.Mutex
	shared  Bucket
	senders map[uintptr]*senderBudget
	proven  int
}

type senderBudget struct {
	b, over Bucket
	proven  bool
}

// allow takes a handshake from the budget of the endpoint from at now,
// and reports whether there was one; without, flood reports that from,
// never proven, sent more than overBurst (then overRate a second)
// CONNECTs beyond it.
func (h *handshakeBudget) allow(from uintptr, now time.Time) (ok, flood bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.senderLocked(from)
	switch {
	case s.proven:
		ok = s.b.Take(now, provenBurst, provenRate)
	case s.b.Tokens(now, senderBurst, senderRate) >= 1 && h.shared.Take(now, unprovenBurst, unprovenRate):
		ok = s.b.Take(now, senderBurst, senderRate)
	}
	return ok, !ok && !s.proven && !s.over.Take(now, overBurst, overRate)
}

// dropped records a CONNECT from the endpoint from dropped by the
// admission of endpoints (admit.go), and reports whether from is
// flooding: more than overBurst (then overRate a second) dropped.
func (h *handshakeBudget) dropped(from uintptr, now time.Time) (flood bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.senderLocked(from)
	return !s.proven && !s.over.Take(now, overBurst, overRate)
}

// proved records that a dialer proved the key through the endpoint from.
func (h *handshakeBudget) proved(from uintptr) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.senderLocked(from)
	if s.proven {
		return
	}
	if h.proven >= maxProvenSenders {
		h.evictLocked(true)
	}
	s.proven, s.b = true, Bucket{}
	h.proven++
}

// senderLocked returns from's budget, made (full) if there is none.
func (h *handshakeBudget) senderLocked(from uintptr) *senderBudget {
	if s := h.senders[from]; s != nil {
		return s
	}
	if h.senders == nil {
		h.senders = make(map[uintptr]*senderBudget)
	}
	if len(h.senders) >= maxHandshakeSenders {
		h.evictLocked(h.proven >= len(h.senders)/2)
	}
	s := &senderBudget{}
	h.senders[from] = s
	return s
}

// evictLocked forgets one endpoint's budget, proven or not as proven says
// (any, in the map's random order).
func (h *handshakeBudget) evictLocked(proven bool) {
	for from, s := range h.senders {
		if s.proven == proven {
			delete(h.senders, from)
			if proven {
				h.proven--
			}
			return
		}
	}
}

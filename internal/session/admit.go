package session

// Admission of endpoints made from the worker addresses that CONNECTs
// carry.
//
// A CONNECT's worker address is its sender's word only: a real worker's
// address with another worker uuid parses, passes every check and is
// reachable, and UCX makes a new endpoint (over tcp a socket, and its
// wire-up) for each uuid it has not met. A flood of 21,000 such CONNECTs
// from one endpoint took a listener to 14,700 endpoints and sockets, and
// honest dials failed during it and for 15-20 s after. So:
//
//   - one sender, one address: a CONNECT whose address names no peer of
//     ours, from an endpoint (Event.From) that already made a peer from
//     another address, or that is a known peer's own, makes nothing. An
//     honest dialer names its own address, always the same one; its
//     CONNECTs after the first find the peer they made.
//   - a rate: endpoints made from CONNECTs come from a token bucket per
//     Transport (connectBurst at once, connectRate a second after that),
//     so that many senders cannot churn endpoints without bound either.
//     CONNECTs that only get a REFUSE (whose sender the handshake does not
//     pass on) draw on a bucket of their own, so that a flood of them
//     does not starve the dials to a real listener.
//
// A CONNECT refused this way is dropped unanswered and counted
// (Stats.ConnectsDropped): its dial fails after twice KeepAlive, with
// ECONNREFUSED. Dials (endpoints this side makes from a registry entry)
// are not limited.

import (
	"time"
)

// Endpoints made from CONNECTs' addresses: at most connectBurst at once,
// connectRate a second after that, per Transport (and as many again for
// endpoints made only to send a REFUSE).
const (
	connectBurst = 128
	connectRate  = 128
)

// admission is a Transport's token buckets for endpoints made from
// CONNECTs (under Transport.mu). Each shard keeps, in madeBy, the peer
// made from a CONNECT that arrived on it by the From that CONNECT came
// from.
type admission struct {
	attach, refuse Bucket
}

// admitLocked decides whether a CONNECT that arrived on s from the
// endpoint from (0: not known) may make an endpoint to addr, a worker
// address that no peer of the chosen shard has; it takes a token if so,
// and counts a refusal. t.mu is held.
func (s *shard) admitLocked(from uintptr, addr []byte) error {
	heldW(&s.t.mu, "admitLocked needs Transport.mu")
	t := s.t
	a := &t.admit
	b := &a.refuse
	if from != 0 {
		if q := s.peersByFrom[from]; q != nil && q.addr != string(addr) ||
			s.madeBy[from] != nil && s.madeBy[from].addr != string(addr) {
			// The sender is a peer of ours under another address, or
			// made one from another address already.
			t.stats.connectsDropped.Add(1)
			return errTooManyPeers
		}
		b = &a.attach
	}
	if !b.Take(time.Now(), connectBurst, connectRate) {
		t.stats.connectsDropped.Add(1)
		return errTooManyPeers
	}
	return nil
}

// madeLocked records that a CONNECT that arrived on s from the endpoint
// from made p (a peer of s or of another shard). t.mu is held.
func (s *shard) madeLocked(p *peer, from uintptr) {
	heldW(&s.t.mu, "madeLocked needs Transport.mu")
	if from == 0 {
		return
	}
	if s.madeBy == nil {
		s.madeBy = make(map[uintptr]*peer)
	}
	p.madeBy, p.madeAt = from, s
	if s.madeBy[from] == nil {
		s.madeBy[from] = p
	}
}

// forgetPeerLocked removes p, a peer of s, from every peer table. t.mu is
// held.
func (s *shard) forgetPeerLocked(p *peer) {
	heldW(&s.t.mu, "forgetPeerLocked needs Transport.mu")
	if s.peers[p.addr] == p {
		delete(s.peers, p.addr)
	}
	if s.peersByEP[p.ep] == p {
		delete(s.peersByEP, p.ep)
	}
	s.forgetFromLocked(p)
	if m := p.madeAt; m != nil && m.madeBy[p.madeBy] == p {
		delete(m.madeBy, p.madeBy)
	}
}

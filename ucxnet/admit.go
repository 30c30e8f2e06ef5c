package ucxnet

// Admission of endpoints made from the worker addresses that CONNECTs
// carry (issue 23, finding 2).
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

import "time"

// Endpoints made from CONNECTs' addresses: at most connectBurst at once,
// connectRate a second after that, per Transport (and as many again for
// endpoints made only to send a REFUSE).
const (
	connectBurst = 128
	connectRate  = 128
)

// admission is a Transport's state for endpoints made from CONNECTs
// (under Transport.mu).
type admission struct {
	attach, refuse bucket
	// madeBy finds the peer made from a CONNECT by the From that CONNECT
	// came from.
	madeBy map[uintptr]*peer
}

// admitLocked decides whether a CONNECT from the endpoint from (0: not
// known) may make an endpoint to a worker address that no peer has; it
// takes a token if so, and counts a refusal. t.mu is held.
func (t *Transport) admitLocked(from uintptr) error {
	a := &t.admit
	b := &a.refuse
	if from != 0 {
		if t.peersByFrom[from] != nil || a.madeBy[from] != nil {
			// The sender is a peer of ours under another address, or
			// made one from another address already.
			t.stats.connectsDropped.Add(1)
			return errTooManyPeers
		}
		b = &a.attach
	}
	if !b.take(time.Now(), connectBurst, connectRate) {
		t.stats.connectsDropped.Add(1)
		return errTooManyPeers
	}
	return nil
}

// madeLocked records that a CONNECT from the endpoint from made p. t.mu is
// held.
func (t *Transport) madeLocked(p *peer, from uintptr) {
	if from == 0 {
		return
	}
	if t.admit.madeBy == nil {
		t.admit.madeBy = make(map[uintptr]*peer)
	}
	p.madeBy = from
	t.admit.madeBy[from] = p
}

// forgetPeerLocked removes p from every peer table. t.mu is held.
func (t *Transport) forgetPeerLocked(p *peer) {
	if t.peers[p.addr] == p {
		delete(t.peers, p.addr)
	}
	if t.peersByEP[p.ep] == p {
		delete(t.peersByEP, p.ep)
	}
	t.forgetFromLocked(p)
	if p.madeBy != 0 && t.admit.madeBy[p.madeBy] == p {
		delete(t.admit.madeBy, p.madeBy)
	}
}

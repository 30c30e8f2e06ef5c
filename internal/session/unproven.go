package session

import "slices"

// Unproven holds a listener's streams that wait for their dialer's
// pre-shared-key proof, oldest first, apart from the accept backlog, so
// that unproven dials cannot take the places of proven ones. It bounds
// them per dialing peer and in all: when a peer's bound is full, Add
// takes nothing and returns the new item itself (its dialer will send it
// again; its older ones are as honest or as hostile), and when the bound
// of all is, it evicts the oldest of the peer holding the most; the
// caller drops what Add returns. An honest dialer proves within a round
// trip. T is the stream, P what identifies its
// peer. The listener's lock guards it.
type Unproven[T, P comparable] struct {
	entries []unprovenEntry[T, P]
}

type unprovenEntry[T, P comparable] struct {
	item T
	peer P
}

// Add records item, from peer, within perPeer such items per peer and
// max in all; evicted reports that evict must be dropped: item itself,
// not recorded, when peer is at its bound, else an entry evicted to make
// room.
func (u *Unproven[T, P]) Add(item T, peer P, perPeer, max int) (evict T, evicted bool) {
	n := 0
	for _, e := range u.entries {
		if e.peer == peer {
			n++
		}
	}
	if n >= perPeer {
		return item, true
	}
	if len(u.entries) >= max {
		i := u.busiest()
		evict, evicted = u.entries[i].item, true
		u.entries = slices.Delete(u.entries, i, i+1)
	}
	u.entries = append(u.entries, unprovenEntry[T, P]{item, peer})
	return evict, evicted
}

// busiest returns the index of the oldest entry of the peer with the most
// entries (the oldest such peer's, on a tie): a full list makes room at
// the expense of whoever holds the most, not of the oldest entry, which
// may be an honest dialer's one handshake among a flooder's many.
func (u *Unproven[T, P]) busiest() int {
	count := make(map[P]int, len(u.entries))
	for _, e := range u.entries {
		count[e.peer]++
	}
	best := 0
	for i, e := range u.entries {
		if count[e.peer] > count[u.entries[best].peer] {
			best = i
		}
	}
	return best
}

// Remove forgets item (proven, or failed).
func (u *Unproven[T, P]) Remove(item T) {
	if i := slices.IndexFunc(u.entries, func(e unprovenEntry[T, P]) bool { return e.item == item }); i >= 0 {
		u.entries = slices.Delete(u.entries, i, i+1)
	}
}

// Len returns how many items wait.
func (u *Unproven[T, P]) Len() int { return len(u.entries) }

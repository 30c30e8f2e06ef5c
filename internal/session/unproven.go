package session

import "slices"

// Unproven holds a listener's streams that wait for their dialer's
// pre-shared-key proof, oldest first, apart from the accept backlog, so
// that unproven dials cannot take the places of proven ones. It bounds
// them per dialing peer and in all: when a bound is full, Add evicts the
// oldest (of that peer, or of all), which the caller drops; an honest
// dialer proves within a round trip. T is the stream, P what identifies
// its peer. The listener's lock guards it.
type Unproven[T, P comparable] struct {
	entries []unprovenEntry[T, P]
}

type unprovenEntry[T, P comparable] struct {
	item T
	peer P
}

// Add records item, from peer, within perPeer such items per peer and
// max in all; evicted reports whether it made room by evicting evict.
func (u *Unproven[T, P]) Add(item T, peer P, perPeer, max int) (evict T, evicted bool) {
	oldest, n := -1, 0
	for i, e := range u.entries {
		if e.peer == peer {
			if n == 0 {
				oldest = i
			}
			n++
		}
	}
	switch {
	case n >= perPeer:
	case len(u.entries) >= max:
		oldest = 0
	default:
		oldest = -1
	}
	if oldest >= 0 {
		evict, evicted = u.entries[oldest].item, true
		u.entries = slices.Delete(u.entries, oldest, oldest+1)
	}
	u.entries = append(u.entries, unprovenEntry[T, P]{item, peer})
	return evict, evicted
}

// Remove forgets item (proven, or failed).
func (u *Unproven[T, P]) Remove(item T) {
	if i := slices.IndexFunc(u.entries, func(e unprovenEntry[T, P]) bool { return e.item == item }); i >= 0 {
		u.entries = slices.Delete(u.entries, i, i+1)
	}
}

// Len returns how many items wait.
func (u *Unproven[T, P]) Len() int { return len(u.entries) }

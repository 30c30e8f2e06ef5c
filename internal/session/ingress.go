package session

// The ingress budget: a peer's frames that carry no stream data are
// counted against a token bucket, and a peer that keeps sending them past
// it is failed, its endpoint closed and its CONNECTs dropped for a while.
// Every frame costs the worker a receive and a dispatch whether it is
// answered or not, so an unbounded flood of them from one peer slowed
// every conn of the worker about 1,000 times.

import (
	"sync"
	"time"
)

// A peer's budget for frames that carry no stream data: PINGs and their
// answers, WINDOWs that grant less than ingressSmallGrant, duplicates,
// malformed frames and frames other than data for conns that are not the
// peer's (data still in flight to a conn that just closed is no flood). (A
// sender that keeps sending CONNECTs to keyed listeners past the budget
// for unproven handshakes is failed too: hsbudget.go.) An
// honest peer sends about one PING per keepalive sweep and a WINDOW per
// quarter of its window read (Config.Window is at least 4 KiB), and
// nothing else of the kind.
const (
	ingressBurst      = 16384
	ingressRate       = 4096
	ingressSmallGrant = 1 << 10
	floodedFor        = time.Minute // how long a flooded peer's CONNECTs are dropped
	floodedMax        = 1024        // flooded worker addresses remembered
	// fromBlockedFor is how long CONNECTs from an endpoint that kept
	// naming addresses the admission dropped (admit.go) are dropped
	// undecoded. Short: an endpoint's From may be reused once UCX
	// destroys it, and a newcomer there must not wait long.
	fromBlockedFor = 10 * time.Second
	minWindow      = 4 * ingressSmallGrant
)

// charge takes one frame that carries no stream data from p's ingress
// budget at now (UnixNano); a peer past its budget is failed.
func (p *peer) charge(now int64) {
	if p == nil {
		return
	}
	p.ingressMu.Lock()
	ok := p.ingress.Take(time.Unix(0, now), ingressBurst, ingressRate)
	p.ingressMu.Unlock()
	if !ok {
		p.flooded(now)
	}
}

// flooded fails p, found flooding us at now (UnixNano), once.
func (p *peer) flooded(now int64) {
	t := p.sh.t
	if !p.flooding.CompareAndSwap(false, true) {
		return
	}
	t.stats.peersFlooded.Add(1)
	t.flooded.add(p.addr, time.Unix(0, now))
	p.fail("it flooded frames that carry no data (more than 16,384 at once, 4,096 a second)")
}

// chargeFrom charges the peer whose endpoint from is, if there is one.
func (s *shard) chargeFrom(from uintptr, now int64) {
	t := s.t
	t.mu.RLock()
	p := s.peersByFrom[from]
	t.mu.RUnlock()
	p.charge(now)
}

// floodedFrom fails the peer whose endpoint from is, or else the one a
// CONNECT from it made, if there is one.
func (s *shard) floodedFrom(from uintptr, now int64) {
	t := s.t
	t.mu.RLock()
	p := s.peersByFrom[from]
	if p == nil && from != 0 {
		p = s.madeBy[from]
	}
	t.mu.RUnlock()
	if p != nil {
		p.flooded(now)
	}
}

// floodList remembers the worker addresses of peers failed for flooding,
// for floodedFor each, at most floodedMax (the oldest forgotten first).
type floodList struct {
	mu    sync.Mutex
	until map[string]time.Time
	// froms are the endpoints (Event.From) that flooded us with CONNECTs
	// the admission dropped: their CONNECTs are dropped before they are
	// decoded, for fromBlockedFor.
	froms map[uintptr]time.Time
}

func (f *floodList) addFrom(from uintptr, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.froms == nil {
		f.froms = make(map[uintptr]time.Time)
	}
	if len(f.froms) >= floodedMax {
		for k := range f.froms { // any: the map's order is random
			delete(f.froms, k)
			break
		}
	}
	f.froms[from] = now.Add(fromBlockedFor)
}

// hasFrom reports whether the endpoint from flooded us with CONNECTs less
// than fromBlockedFor ago.
func (f *floodList) hasFrom(from uintptr, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.froms[from]
	if ok && !now.Before(u) {
		delete(f.froms, from)
		return false
	}
	return ok
}

func (f *floodList) add(addr string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.until == nil {
		f.until = make(map[string]time.Time)
	}
	if len(f.until) >= floodedMax {
		oldest, at := "", time.Time{}
		for a, u := range f.until {
			if oldest == "" || u.Before(at) {
				oldest, at = a, u
			}
		}
		delete(f.until, oldest)
	}
	f.until[addr] = now.Add(floodedFor)
}

// has reports whether addr flooded us less than floodedFor ago.
func (f *floodList) has(addr []byte, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.until[string(addr)]
	if ok && !now.Before(u) {
		delete(f.until, string(addr))
		return false
	}
	return ok
}

package lane

// The kernel-TCP lane's listening sockets: where they listen, the accept
// loops, and the bounds on connections still in their preamble.

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"
)

// The bounds on a listener's TCP conns whose preamble is not done: at most
// MaxPending in all and MaxPendingPerSource from one source (an IPv4
// address, an IPv6 /64), so that one source never holds more than half
// and another always finds room. A conn beyond either bound takes the
// place of a conn of its own source when that source is at its bound,
// else of the source holding the most: the oldest whose hello had not all
// come when it was accepted and is still not read (an honest dialer
// sends it at once), else the oldest waiting for its key proof with
// nothing unread, else the oldest of all.
const (
	MaxPending          = 64
	MaxPendingPerSource = MaxPending / 2
)

// DeferAccept is how long the kernel holds a connection that sent nothing
// before Accept sees it (Linux: TCP_DEFER_ACCEPT).
const DeferAccept = 2 * time.Second

// Listener is a ucxnet listener's kernel-TCP side: its sockets, the
// endpoints it publishes, and its conns still in their preamble.
type Listener struct {
	lns       []*net.TCPListener
	endpoints []netip.AddrPort
	serve     func(*Listener, *net.TCPConn)
	overCap   func()
	wg        sync.WaitGroup
	mu        sync.Mutex
	pending   map[*net.TCPConn]*preamble // conns in their preamble
	sources   map[netip.Prefix]int       // how many of them each source holds
	evicted   map[*net.TCPConn]struct{}  // reset to make room, serve not done
	seq       uint64                     // admissions so far: pending's order
	// reserved counts backlog places held for conns told OK but not yet
	// queued: the dialer's dial returns at the OK.
	reserved int
	closed   bool
}

// preamble is what the listener knows of a conn in its preamble.
type preamble struct {
	src      netip.Prefix
	seq      uint64 // admission order
	heard    bool   // its whole hello came: unread at admission, or read
	peerTurn bool   // the conn waits for its peer's bytes
}

// The ranks of conns to evict, lowest first.
const (
	rankSilent   = iota // its hello not all come
	rankUnproven        // waiting for its key proof, nothing unread
	rankBusy            // being worked on here, or its bytes unread
)

func (p *preamble) rank(tc *net.TCPConn) int {
	switch {
	case !p.heard:
		return rankSilent
	case p.peerTurn && Unread(tc) == 0:
		return rankUnproven
	}
	return rankBusy
}

// Listen listens where ListenAddrs(devices) says, on one port where it
// can, and calls serve(listener, conn) in a goroutine of its own for each
// conn accepted (overCap, for each conn evicted because the preamble
// bounds were reached). serve must call Done when the conn's
// preamble ends, and PeerTurn as the preamble goes back and forth. Listen
// returns nil where there is no address to listen on.
func Listen(devices string, serve func(*Listener, *net.TCPConn), overCap func()) (*Listener, error) {
	addrs, err := ListenAddrs(devices)
	if err != nil || len(addrs) == 0 {
		return nil, err
	}
	tl := &Listener{serve: serve, overCap: overCap, pending: map[*net.TCPConn]*preamble{},
		sources: map[netip.Prefix]int{}, evicted: map[*net.TCPConn]struct{}{}}
	port := "0"
	lc := net.ListenConfig{Control: deferAccept}
	for _, a := range addrs {
		ln, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort(a.Bind, port))
		if err != nil && port != "0" {
			ln, err = lc.Listen(context.Background(), "tcp", net.JoinHostPort(a.Bind, "0"))
		}
		if err != nil {
			tl.Close()
			return nil, err
		}
		tln := ln.(*net.TCPListener)
		tl.lns = append(tl.lns, tln)
		ap := tln.Addr().(*net.TCPAddr).AddrPort()
		_, port, _ = net.SplitHostPort(tln.Addr().String())
		for _, p := range a.Publish {
			tl.endpoints = append(tl.endpoints, netip.AddrPortFrom(p, ap.Port()))
		}
	}
	SortEndpoints(tl.endpoints)
	for _, ln := range tl.lns {
		tl.wg.Add(1)
		go tl.acceptLoop(ln)
	}
	return tl, nil
}

// Endpoints returns the endpoints the listener publishes, in order.
func (tl *Listener) Endpoints() []netip.AddrPort { return tl.endpoints }

// Close stops accepting, closes the conns still in their preamble and
// waits for the accept loops and serve calls to end.
func (tl *Listener) Close() {
	tl.mu.Lock()
	tl.closed = true
	for tc := range tl.pending {
		tc.Close()
	}
	tl.mu.Unlock()
	for _, ln := range tl.lns {
		ln.Close()
	}
	tl.wg.Wait()
}

// acceptLoop accepts TCP conns and starts serving them.
func (tl *Listener) acceptLoop(ln *net.TCPListener) {
	defer tl.wg.Done()
	var backoff time.Duration
	for {
		tc, err := ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || tl.isClosed() {
				return
			}
			// EMFILE and the like: wait, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		ok, evicted := tl.admit(tc)
		if evicted {
			tl.overCap()
		}
		if !ok { // closed
			Reset(tc)
			continue
		}
		tl.wg.Add(1)
		go func() {
			defer tl.wg.Done()
			tl.serve(tl, tc)
		}()
	}
}

func (tl *Listener) isClosed() bool {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.closed
}

// Source is the source a conn from a is counted under: its IPv4 address,
// or its IPv6 /64 (what one host is given).
func Source(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

// SourceOf is tc's source; the zero prefix if its address is unknown.
func SourceOf(tc *net.TCPConn) netip.Prefix {
	if ta, ok := tc.RemoteAddr().(*net.TCPAddr); ok {
		return Source(ta.AddrPort().Addr())
	}
	return netip.Prefix{}
}

// admit records a conn in its preamble, evicting (resetting) another
// where the bounds say so; false if the listener is closed.
func (tl *Listener) admit(tc *net.TCPConn) (ok, evicted bool) {
	src := SourceOf(tc)
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.closed {
		return false, false
	}
	ownSource := tl.sources[src] >= MaxPendingPerSource
	if ownSource || len(tl.pending) >= MaxPending {
		v := tl.victim(src, ownSource)
		tl.forget(v)
		tl.evicted[v] = struct{}{}
		Reset(v)
		evicted = true
	}
	tl.seq++
	tl.pending[tc] = &preamble{src: src, seq: tl.seq, heard: HelloCame(tc), peerTurn: true}
	tl.sources[src]++
	return true, evicted
}

// victim is the conn to evict for a newcomer from src, among the conns of
// src if ownSource, else of the source holding the most: the oldest of
// the lowest rank.
func (tl *Listener) victim(src netip.Prefix, ownSource bool) *net.TCPConn {
	var best *net.TCPConn
	var bestP *preamble
	bestRank := 0
	for tc, p := range tl.pending {
		if ownSource && p.src != src {
			continue
		}
		r := p.rank(tc)
		if bestP != nil {
			n, bn := tl.sources[p.src], tl.sources[bestP.src]
			if n < bn || n == bn && (r > bestRank || r == bestRank && p.seq > bestP.seq) {
				continue
			}
		}
		best, bestP, bestRank = tc, p, r
	}
	return best
}

// forget removes tc from the conns in their preamble; tl.mu is held.
func (tl *Listener) forget(tc *net.TCPConn) {
	p, ok := tl.pending[tc]
	if !ok {
		return
	}
	delete(tl.pending, tc)
	if tl.sources[p.src]--; tl.sources[p.src] <= 0 {
		delete(tl.sources, p.src)
	}
}

// Pending returns how many conns are in their preamble.
func (tl *Listener) Pending() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return len(tl.pending)
}

// PeerTurn says whether tc now waits for its peer's bytes (true: its key
// proof) or is this side's to work on; its hello has been read either
// way.
func (tl *Listener) PeerTurn(tc *net.TCPConn, peer bool) {
	tl.mu.Lock()
	if p, ok := tl.pending[tc]; ok {
		p.heard, p.peerTurn = true, peer
	}
	tl.mu.Unlock()
}

// Evicted reports whether tc was reset to make room for a newer conn (its
// error is then no fault of its own to count).
func (tl *Listener) Evicted(tc *net.TCPConn) bool {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	_, ok := tl.evicted[tc]
	return ok
}

// Reserve holds a backlog place for a conn about to be told OK; false if
// the listener is closed or full reports true for the places already
// reserved.
func (tl *Listener) Reserve(full func(reserved int) bool) bool {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.closed || full(tl.reserved) {
		return false
	}
	tl.reserved++
	return true
}

// Unreserve gives back a place Reserve held.
func (tl *Listener) Unreserve() {
	tl.mu.Lock()
	tl.reserved--
	tl.mu.Unlock()
}

// Done forgets a conn whose preamble ended.
func (tl *Listener) Done(tc *net.TCPConn) {
	tl.mu.Lock()
	tl.forget(tc)
	delete(tl.evicted, tc)
	tl.mu.Unlock()
}

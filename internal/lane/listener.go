package lane

// The kernel-TCP lane's listening sockets: where they listen, the accept
// loops, and the bound on connections still in their preamble.

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"
)

// MaxPending bounds a listener's TCP conns whose preamble is not done;
// more are reset at once.
const MaxPending = 64

// Listener is a ucxnet listener's kernel-TCP side: its sockets, the
// endpoints it publishes, and its conns still in their preamble.
type Listener struct {
	lns       []*net.TCPListener
	endpoints []netip.AddrPort
	serve     func(*Listener, *net.TCPConn)
	overCap   func()
	wg        sync.WaitGroup
	mu        sync.Mutex
	pending   map[*net.TCPConn]struct{} // conns in their preamble
	// reserved counts backlog places held for conns told OK but not yet
	// queued: the dialer's dial returns at the OK.
	reserved int
	closed   bool
}

// Listen listens where ListenAddrs(devices) says, on one port where it
// can, and calls serve(listener, conn) in a goroutine of its own for each
// conn accepted
// (overCap, for each conn reset because MaxPending were in their
// preamble). serve must call Done when the conn's preamble ends. Listen
// returns nil where there is no address to listen on.
func Listen(devices string, serve func(*Listener, *net.TCPConn), overCap func()) (*Listener, error) {
	addrs, err := ListenAddrs(devices)
	if err != nil || len(addrs) == 0 {
		return nil, err
	}
	tl := &Listener{serve: serve, overCap: overCap, pending: map[*net.TCPConn]struct{}{}}
	port := "0"
	for _, a := range addrs {
		ln, err := net.Listen("tcp", net.JoinHostPort(a.Bind, port))
		if err != nil && port != "0" {
			ln, err = net.Listen("tcp", net.JoinHostPort(a.Bind, "0"))
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
		if !tl.admit(tc) {
			tl.overCap()
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

// admit records a conn in its preamble; false if the listener is closed
// or MaxPending are already there.
func (tl *Listener) admit(tc *net.TCPConn) bool {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.closed || len(tl.pending) >= MaxPending {
		return false
	}
	tl.pending[tc] = struct{}{}
	return true
}

// Pending returns how many conns are in their preamble.
func (tl *Listener) Pending() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return len(tl.pending)
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
	delete(tl.pending, tc)
	tl.mu.Unlock()
}

package session

// The kernel channel (internal/kchan) between Transports on one host: who
// the peer is, from the kernel (SO_PEERCRED), for shared memory; and when
// its process is gone (the channel's EOF), for liveness.
//
// A channel is trusted when the kernel says its peer runs as this
// process's effective user: only then are its peer's worker addresses
// recorded (links), and only a trusted channel's EOF fails peers. A link
// is vouched for shared memory when, in addition, both sides run the
// same UCX release and share an IPC namespace. Every address handed to UCX goes through ucxAddr:
// a vouched link's exact bytes as they are, any other address with its
// shared-memory interfaces removed (StripSharedMemory).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/ucxnet/ucxnet/internal/kchan"
)

// EnvKChan names the environment variable that, set to "0", runs
// Transports without kernel channels: no shared memory between them
// (every address is stripped of it), and liveness by keepalive alone.
const EnvKChan = "UCXNET_KCHAN"

// maxLinks bounds the trusted channels a Transport keeps.
const maxLinks = 1024

// closedGrace is how long after a peer announced its close (and closed
// its channel) its endpoints are failed if they are still up: its
// Transport sent its conns' FINs and RSTs before it closed the channel.
const closedGrace = 2 * time.Second

// link is a trusted channel and what it vouches for.
type link struct {
	ch    *kchan.Chan
	addrs []string // the peer's worker addresses, as it sent them
	shm   bool     // vouched for shared memory
	why   string   // why not, if not
}

// chans are a Transport's kernel channels.
type chans struct {
	t       *Transport // whose peers a channel's end fails
	mu      sync.Mutex
	srv     *kchan.Server // nil: no channels
	self    kchan.Hello
	byAddr  map[string]*link
	links   map[*link]struct{}
	dialing map[string]chan struct{} // dials to a worker address under way
	closed  bool
}

// start listens on the transport's channel names, one per worker address (UCX
// engines only: the in-memory one of tests has no shared memory).
func (k *chans) start() {
	t := k.t
	if os.Getenv(EnvKChan) == "0" {
		return
	}
	k.byAddr = make(map[string]*link)
	k.links = make(map[*link]struct{})
	k.dialing = make(map[string]chan struct{})
	k.self = kchan.Hello{Release: t.lib.Version, IPCNS: kchan.IPCNamespace()}
	var names []string
	for _, s := range t.shards {
		a := s.eng.Address()
		k.self.Addrs = append(k.self.Addrs, a)
		names = append(names, kchan.Name(a))
	}
	srv, taken, err := kchan.Listen(names, k.self, k.admit, k.ended)
	if err != nil {
		t.log.event(slog.LevelDebug, "ucxnet: no kernel channel", "err", err)
		return
	}
	if len(taken) > 0 {
		t.log.event(slog.LevelWarn, "ucxnet: kernel channel name taken by another process: peers on this host reach this transport without shared memory", "names", taken)
	}
	k.srv = srv
}

// close closes the transport's channels, announcing the close: called once the
// conns' FINs and RSTs went out.
func (k *chans) close() {
	k.mu.Lock()
	k.closed = true
	srv := k.srv
	links := make([]*link, 0, len(k.links))
	for l := range k.links {
		links = append(links, l)
	}
	k.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
	for _, l := range links {
		l.ch.Close(true)
	}
}

// trusted reports whether the kernel says a channel's peer runs as this
// process's effective user. Both sides must come to the same verdict (as
// on vouch's): an endpoint pair with shared memory on one side only makes
// UCX abort ("endpoint reconfiguration not supported"), so root trusts
// root only, and another user's root process is not trusted either.
func trusted(c kchan.Cred) bool {
	return c.UID == uint32(os.Geteuid())
}

// vouch says whether a trusted channel's peer may share memory with t,
// and why not: from facts both sides see alike, so that they agree.
func (k *chans) vouch(ch *kchan.Chan) (bool, string) {
	switch h := ch.Hello; {
	case h.Release != k.self.Release:
		return false, fmt.Sprintf("UCX %s here, %s there", k.self.Release, h.Release)
	case h.IPCNS == 0 || h.IPCNS != k.self.IPCNS:
		return false, "another IPC namespace"
	}
	return true, ""
}

// addLink records a trusted channel; false if t is closed or keeps
// maxLinks already.
func (k *chans) addLink(ch *kchan.Chan) (*link, bool) {
	l := &link{ch: ch}
	l.shm, l.why = k.vouch(ch)
	for _, a := range ch.Hello.Addrs {
		l.addrs = append(l.addrs, string(a))
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed || len(k.links) >= maxLinks {
		return nil, false
	}
	k.links[l] = struct{}{}
	for _, a := range l.addrs {
		// A second channel from the same Transport (two dials raced)
		// takes only addresses no live channel holds: its end fails no
		// peer that another channel still vouches for.
		if k.byAddr[a] == nil {
			k.byAddr[a] = l
		}
	}
	return l, true
}

// admit records a dialer's channel before it is answered, so that
// its CONNECTs find its addresses vouched for (kchan's goroutine).
func (k *chans) admit(ch *kchan.Chan) bool {
	t := k.t
	if !trusted(ch.Cred) || len(ch.Hello.Addrs) == 0 {
		return false
	}
	_, ok := t.kc.addLink(ch)
	return ok
}

// ended forgets a channel that ended; if its peer's process is gone
// (or it announced its close a while ago), its endpoints are failed
// (kchan's goroutine, or the dialer's watch).
func (k *chans) ended(ch *kchan.Chan, end kchan.End) {
	t := k.t
	k.mu.Lock()
	var l *link
	for m := range k.links {
		if m.ch == ch {
			l = m
		}
	}
	var addrs []string
	if l != nil {
		delete(k.links, l)
		for _, a := range l.addrs {
			if k.byAddr[a] == l {
				delete(k.byAddr, a)
				addrs = append(addrs, a)
			}
		}
	}
	closed := k.closed
	k.mu.Unlock()
	ch.Close(false)
	if closed || len(addrs) == 0 {
		return
	}
	switch end {
	case kchan.Died:
		t.kc.peersGone(addrs)
	case kchan.Closed:
		time.AfterFunc(closedGrace, func() { t.kc.peersGone(addrs) })
	}
}

// ensure makes sure a trusted channel to the Transport at addr is up
// before an endpoint is made to it, if that Transport runs on this host:
// it dials the channel once (concurrent dials to one address wait for
// the first). Nothing listening means another host, or a peer without a
// channel: addr is then not vouched for.
func (k *chans) ensure(ctx context.Context, addr []byte) {
	t := k.t
	for {
		k.mu.Lock()
		if k.srv == nil || k.closed || k.byAddr[string(addr)] != nil {
			k.mu.Unlock()
			return
		}
		wait := k.dialing[string(addr)]
		if wait == nil {
			break
		}
		k.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return
		}
	}
	done := make(chan struct{})
	k.dialing[string(addr)] = done
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		delete(k.dialing, string(addr))
		k.mu.Unlock()
		close(done)
	}()
	ch, err := kchan.Dial(ctx, kchan.Name(addr), k.self)
	if err != nil {
		return
	}
	if !trusted(ch.Cred) || !containsAddr(ch.Hello.Addrs, addr) {
		// Another user's, or not the Transport addr names (a squatter).
		ch.Close(false)
		return
	}
	if _, ok := t.kc.addLink(ch); !ok {
		ch.Close(false)
		return
	}
	go func() { t.kc.ended(ch, ch.Watch()) }()
}

// containsAddr reports whether addrs holds addr, byte for byte.
func containsAddr(addrs [][]byte, addr []byte) bool {
	for _, a := range addrs {
		if bytes.Equal(a, addr) {
			return true
		}
	}
	return false
}

// shmVouched reports whether a trusted channel vouches for shared memory
// with the worker at addr, and if not, why.
func (k *chans) shmVouched(addr []byte) (bool, string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l := k.byAddr[string(addr)]; l != nil {
		return l.shm, l.why
	}
	if k.srv == nil {
		return false, "no kernel channel here"
	}
	return false, "no kernel channel to the peer vouches for it"
}

// shmWhyNot says why a conn to the worker at addr, a peer on this host
// (a trusted channel reaches it) whose address offers shared memory,
// will not use it: "" if it may, or it offers none, or no channel says
// it is on this host.
func (k *chans) shmWhyNot(addr []byte) string {
	t := k.t
	if !t.ucx.IsUCX(t.eng) {
		return ""
	}
	if o, err := t.ucx.Offer(addr); err != nil || !o.SharedMemory {
		return ""
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if l := k.byAddr[string(addr)]; l != nil && !l.shm {
		return "no shared memory: " + l.why
	}
	return ""
}

// ucxAddr is the address to hand UCX for the worker at addr: addr itself
// when a trusted channel vouches for shared memory with it, else addr
// without its shared-memory interfaces. Every endpoint is made from what
// it returns. An address the engine would refuse as it is (a forged
// interface) is refused before anything is removed from it, and one
// left with no transport too.
func (k *chans) ucxAddr(addr []byte) ([]byte, error) {
	t := k.t
	if t.ucx.IsUCX(t.eng) && !t.ucx.ValidAddress(addr) {
		return nil, errors.New("not a worker address this build hands to UCX")
	}
	if ok, _ := t.kc.shmVouched(addr); ok {
		return addr, nil
	}
	out, err := t.stripShm(addr)
	if err != nil {
		return nil, fmt.Errorf("address unusable without shared memory: %w", err)
	}
	if len(out) == 0 {
		return nil, errors.New("address offers only shared memory, and no kernel channel vouches for its sender")
	}
	return out, nil
}

// peersGone fails, on every shard, the peers at addrs, whose process is
// gone: through the shard's engine goroutine, after a progress pass (see
// reapGone).
func (k *chans) peersGone(addrs []string) {
	t := k.t
	if t.isClosed() {
		return
	}
	for _, s := range t.shards {
		s.gone.mu.Lock()
		s.gone.addrs = append(s.gone.addrs, addrs...)
		s.gone.mu.Unlock()
		s.wakeForGone()
	}
}

// wakeForGone has s's engine run a pass and then deliver a Writable
// event, on which it reaps what peersGone queued: a holder that asks for
// the worker is owed one (engine.Engine.Acquire).
func (s *shard) wakeForGone() {
	w := s.eng.Acquire(true)
	if w == nil {
		return
	}
	s.eng.Acquire(false)
	w.GiveBack()
}

// goneQueue is the addresses of peers whose process is gone, waiting for
// the shard's engine goroutine.
type goneQueue struct {
	mu    sync.Mutex
	addrs []string
	// passes counts the passes that still brought frames since the
	// queue was last reaped (engine goroutine).
	passes int
}

// maxGonePasses bounds the passes a dead peer's frames may take to be
// delivered before its conns fail.
const maxGonePasses = 64

// reapGone fails the peers whose process is gone (engine goroutine, on a
// Writable event). Frames that arrived before the death are delivered
// first: while the batch still brought frames, it waits for another
// pass.
func (s *shard) reapGone(frames bool) {
	s.owner.check()
	q := &s.gone
	q.mu.Lock()
	if len(q.addrs) == 0 {
		q.mu.Unlock()
		return
	}
	if frames && q.passes < maxGonePasses {
		q.passes++
		q.mu.Unlock()
		s.wakeForGone()
		return
	}
	addrs := q.addrs
	q.addrs, q.passes = nil, 0
	q.mu.Unlock()
	t := s.t
	for _, a := range addrs {
		t.mu.RLock()
		p := s.peers[a]
		t.mu.RUnlock()
		if p != nil {
			t.stats.peersExited.Add(1)
			p.fail("its process exited (kernel channel closed)")
		}
	}
}

// joinWhy joins two reasons.
func joinWhy(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "; " + b
}

// alive reports whether a trusted channel to the Transport of the
// worker at addr is up: its process lives.
func (k *chans) alive(addr string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.byAddr[addr] != nil
}

// noStrip is stripShm for engines without shared memory: addresses as
// they are.
func noStrip(addr []byte) ([]byte, error) { return addr, nil }

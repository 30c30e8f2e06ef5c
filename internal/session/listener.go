package session

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"time"

	"github.com/ucxnet/ucxnet/internal/lane"

	"github.com/ucxnet/ucxnet/registry"
)

// ListenConfig configures Listen. The zero value listens on the default
// transport. Its fields mean what ucxnet.ListenConfig's do (Transport is
// the session's): ucxnet's copies them, and a test there checks that the
// two have the same fields in the same order.
type ListenConfig struct {
	Transport *Transport
	Service   string
	Meta      map[string]string
	Backlog   int
	PSK       []byte
	KeepAlive time.Duration
}

// Listener is a ucxnet listener; ucxnet's Listener is the net.Listener
// over it.
type Listener struct {
	t   *Transport
	psk []byte
	ka  time.Duration // the accepted conns' keepalive
	// pendingAuth holds the conns waiting for a pre-shared-key proof,
	// oldest first (under mu).
	pendingAuth Unproven[*Conn, *peer]
	addr        Addr
	queue       chan Stream
	mu          sync.Mutex
	closed      bool
	done        chan struct{}
	tcp         *lane.Listener // the kernel-TCP lane's side, if any
}

// Listen announces name: it publishes the transport's worker address under
// name in the registry and accepts conns dialed to it. An empty name
// publishes a fresh unique name, which l.Addr().String() returns. A live
// listener of the same name, here or in another process, makes it fail
// with an error matching syscall.EADDRINUSE. Its errors are bare (the
// face wraps them in a *net.OpError).
func (lc *ListenConfig) Listen(ctx context.Context, name string) (*Listener, error) {
	t := lc.Transport
	if t == nil {
		return nil, errNoTransport
	}
	if name == "" {
		name = registry.UniqueName()
	}
	if err := registry.ValidName(name); err != nil {
		return nil, err
	}
	psk, err := resolvePSK(lc.PSK)
	if err != nil {
		return nil, err
	}
	backlog := lc.Backlog
	if backlog <= 0 {
		backlog = t.cfg.Backlog
	}
	ka := lc.KeepAlive
	if ka == 0 {
		ka = t.cfg.KeepAlive
	}
	l := &Listener{t: t, psk: psk, ka: ka, addr: Addr{Name: name}, queue: make(chan Stream, backlog), done: make(chan struct{})}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, ErrTransportClosed
	}
	if _, dup := t.listeners[name]; dup {
		t.mu.Unlock()
		return nil, registry.ErrNameInUse
	}
	t.listeners[name] = l
	t.mu.Unlock()

	pid, start, host := registry.CurrentProcess()
	meta, err := l.startTCPLane(withUCXRelease(lc.Meta, t.lib.Version))
	e := registry.Entry{
		Name: name, Service: lc.Service, Address: t.eng.Address(),
		PID: pid, StartTime: start, Host: host, Meta: meta,
	}
	if err == nil {
		err = t.reg.Register(ctx, e)
	}
	if err != nil {
		l.stopTCPLane()
		t.mu.Lock()
		delete(t.listeners, name)
		t.mu.Unlock()
		return nil, err
	}
	return l, nil
}

// enqueue hands an accepted conn to Accept; false if the backlog is full.
func (l *Listener) enqueue(c Stream) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	select {
	case l.queue <- c:
		return true
	default:
		return false
	}
}

// addPendingAuth records a conn that waits for its dialer's
// pre-shared-key proof. Such conns wait apart from the backlog, so that
// unproven dials cannot take the places of proven ones; there are at most
// maxPendingAuthPerPeer of them per dialing worker (c itself is returned,
// not recorded, when its dialer is at that bound) and maxPendingAuth in
// all (then the busiest dialer's oldest is returned); what is returned is
// to be dropped.
func (l *Listener) addPendingAuth(c *Conn) (evict *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	evict, _ = l.pendingAuth.Add(c, c.peer(), maxPendingAuthPerPeer, maxPendingAuth)
	return evict
}

// removePendingAuth forgets a conn added by addPendingAuth (proven, or
// failed).
func (l *Listener) removePendingAuth(c *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pendingAuth.Remove(c)
}

func (l *Listener) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// AcceptStream waits for and returns the next stream, until expired is
// closed (os.ErrDeadlineExceeded; nil: no deadline). After Close it
// returns net.ErrClosed (Close reset the conns still queued).
func (l *Listener) AcceptStream(expired <-chan struct{}) (Stream, error) {
	select {
	case <-l.done:
		return nil, net.ErrClosed
	case <-expired:
		return nil, os.ErrDeadlineExceeded
	default:
	}
	select {
	case c := <-l.queue:
		c.accepted()
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-expired:
		return nil, os.ErrDeadlineExceeded
	}
}

// Closed reports whether Close was called.
func (l *Listener) Closed() bool { return l.isClosed() }

// Close withdraws the name from the registry, refuses further dials and
// resets conns not yet accepted. Its errors are bare: net.ErrClosed after
// Close, or the registry's.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return net.ErrClosed
	}
	l.closed = true
	close(l.done)
	l.mu.Unlock()
	l.stopTCPLane()

	t := l.t
	t.mu.Lock()
	if t.listeners[l.addr.Name] == l {
		delete(t.listeners, l.addr.Name)
	}
	t.mu.Unlock()
	err := t.reg.Unregister(context.Background(), l.addr.Name)
	for {
		select {
		case c := <-l.queue:
			c.abort()
			continue
		default:
		}
		break
	}
	if err != nil && !errors.Is(err, registry.ErrNotFound) {
		return err
	}
	return nil
}

// Addr returns the listener's name.
func (l *Listener) Addr() net.Addr { return l.addr }

// MetaUCXRelease is the registry meta key under which a listener publishes
// the UCX release it runs (e.g. "1.18.1"), so that a dial that fails can
// say which two releases met. It replaces a value the application set.
const MetaUCXRelease = "ucx"

// withUCXRelease returns meta with MetaUCXRelease v added (a copy; meta is
// the application's).
func withUCXRelease(meta map[string]string, v string) map[string]string {
	if v == "" {
		return meta
	}
	out := make(map[string]string, len(meta)+1)
	for k, x := range meta {
		out[k] = x
	}
	out[MetaUCXRelease] = v
	return out
}

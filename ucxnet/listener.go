package ucxnet

import (
	"context"
	"net"
	"time"

	"github.com/ucxnet/ucxnet/internal/session"
	"github.com/ucxnet/ucxnet/registry"
)

// ListenConfig configures Listen. The zero value listens on the default
// transport.
type ListenConfig struct {
	// Transport to listen on; nil means DefaultTransport.
	Transport *Transport
	// Service, if set, publishes the listener as an instance of this
	// service name: dialing the service name reaches one of its live
	// instances, and registry.Instances lists them all.
	Service string
	// Meta is published with the registry entry.
	Meta map[string]string
	// Backlog overrides the transport's Backlog for this listener.
	Backlog int
	// PSK, if set, is a pre-shared key dialers must prove they know
	// (a CPace key exchange and a mutual proof in the handshake; see
	// Dialer.PSK and docs/PROTOCOL.md §5).
	// Nil means the key in the file $UCXNET_PSK_FILE names, if set.
	PSK []byte
	// KeepAlive, if not zero, replaces the Transport's Config.KeepAlive
	// for the conns this listener accepts (see Dialer.KeepAlive);
	// negative turns ucxnet's keepalive off for them.
	KeepAlive time.Duration
}

// Listener is a ucxnet listener. It implements net.Listener; Accept's
// conns are *Conn.
type Listener struct {
	l *session.Listener
}

// Listen announces name on the default transport. network must be "ucx"
// (or "tcp", "tcp4", "tcp6"). An empty name publishes a fresh unique name,
// which ln.Addr().String() returns.
func Listen(network, name string) (net.Listener, error) {
	var lc ListenConfig
	return lc.Listen(context.Background(), network, name)
}

// Listen announces name: it publishes the transport's worker address under
// name in the registry and accepts conns dialed to it. A live listener of
// the same name, here or in another process, makes it fail with an error
// matching syscall.EADDRINUSE. Its errors are *net.OpError: Op "listen",
// Net "ucx" and Addr the name (the fresh one, for an empty name); for a
// network other than those Listen takes, Net that network and no Addr.
func (lc *ListenConfig) Listen(ctx context.Context, network, name string) (net.Listener, error) {
	if err := checkNetwork(network); err != nil {
		return nil, &net.OpError{Op: "listen", Net: network, Err: err}
	}
	if name == "" {
		name = registry.UniqueName() // here, so that an error names it
	}
	slc := lc.session()
	l, err := slc.Listen(ctx, name)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: Network, Addr: Addr{Name: name}, Err: err}
	}
	return &Listener{l: l}, nil
}

// opErr wraps a session error in a *net.OpError with the listener's name.
func (l *Listener) opErr(op string, err error) error {
	if err == nil {
		return nil
	}
	return &net.OpError{Op: op, Net: Network, Addr: l.Addr(), Err: err}
}

// Accept waits for and returns the next conn, a *Conn. After Close it
// returns an error matching net.ErrClosed. Its errors are *net.OpError
// (Op "accept", Addr the listener's name).
func (l *Listener) Accept() (net.Conn, error) {
	s, err := l.l.AcceptStream()
	if err != nil {
		return nil, l.opErr("accept", err)
	}
	return newConn(s), nil
}

// Close withdraws the name from the registry, refuses further dials and
// resets conns not yet accepted. A second Close returns an error matching
// net.ErrClosed. Its errors are *net.OpError (Op "close").
func (l *Listener) Close() error { return l.opErr("close", l.l.Close()) }

// Addr returns the listener's name.
func (l *Listener) Addr() net.Addr { return faceAddr(l.l.Addr()) }

// session returns the session's ListenConfig with lc's fields.
func (lc *ListenConfig) session() session.ListenConfig {
	return session.ListenConfig{Transport: lc.Transport.session(), Service: lc.Service, Meta: lc.Meta,
		Backlog: lc.Backlog, PSK: lc.PSK, KeepAlive: lc.KeepAlive}
}

package ucxnet

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/ucxnet/ucxnet/internal/deadline"

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
	// Dialer.PSK and docs/PROTOCOL.md, "Handshake").
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
	l  *session.Listener
	dl deadline.Deadline // Accept's (SetDeadline)
}

// Listen announces name on the default transport. network must be "ucx".
// A name is a registry name, not a host:port (see ListenConfig.Listen).
// An empty name publishes a fresh unique name, which ln.Addr().String()
// returns.
func Listen(network, name string) (net.Listener, error) {
	var lc ListenConfig
	return lc.Listen(context.Background(), network, name)
}

// Listen announces name: it publishes the transport's worker address under
// name in the registry and accepts conns dialed to it. A live listener of
// the same name, here or in another process, makes it fail with an error
// matching syscall.EADDRINUSE. Its errors are *net.OpError: Op "listen",
// Net "ucx" and Addr the name (the fresh one, for an empty name); for a
// network other than "ucx" (Dial's aliases "tcp", "tcp4" and "tcp6"
// included: no listener is made by code that passes a TCP network on),
// Net that network, no Addr and a net.UnknownNetworkError, as
// net.Listen("udp4x", ...) gives.
//
// A name is any printable text a registry takes ("cache", "db/primary"),
// except one that reads as a TCP host:port ("127.0.0.1:0", ":8080",
// "web:80", "[::1]:0"): Dial takes "host:port" for the name "host" (as
// net/http dials), so such a listener could not be told from "host", and
// ":0" would name one listener, not a fresh port. Listen refuses it with
// an error matching registry.ErrInvalidName; "" asks for a fresh name.
func (lc *ListenConfig) Listen(ctx context.Context, network, name string) (net.Listener, error) {
	if network != Network {
		return nil, &net.OpError{Op: "listen", Net: network, Err: net.UnknownNetworkError(network)}
	}
	if err := checkName(name); err != nil {
		return nil, &net.OpError{Op: "listen", Net: Network, Addr: Addr{Name: name}, Err: err}
	}
	if name == "" {
		name = registry.UniqueName() // here, so that an error names it
	}
	slc := lc.session()
	if slc.Transport == nil {
		dt, err := DefaultTransport()
		if err != nil {
			return nil, &net.OpError{Op: "listen", Net: Network, Addr: Addr{Name: name}, Err: err}
		}
		slc.Transport = dt.t
	}
	l, err := slc.Listen(ctx, name)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: Network, Addr: Addr{Name: name}, Err: err}
	}
	return &Listener{l: l, dl: deadline.Make()}, nil
}

// checkName refuses a name that reads as a TCP host:port.
func checkName(name string) error {
	_, port, err := net.SplitHostPort(name)
	if err != nil || strings.Trim(port, "0123456789") != "" {
		return nil
	}
	return fmt.Errorf("%w: %q is a TCP host:port; a ucxnet listener's address is a registry name "+
		"such as %q (dialed as %q), or \"\" for a fresh one", registry.ErrInvalidName, name, "cache", "cache")
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
	s, err := l.l.AcceptStream(l.dl.Wait())
	if err != nil {
		return nil, l.opErr("accept", err)
	}
	return newConn(s), nil
}

// Close withdraws the name from the registry, refuses further dials and
// resets conns not yet accepted. A second Close returns an error matching
// net.ErrClosed. Its errors are *net.OpError (Op "close").
func (l *Listener) Close() error { return l.opErr("close", l.l.Close()) }

// SetDeadline sets the deadline for Accept, as
// (*net.TCPListener).SetDeadline does: past it, Accept (one blocked
// already included) returns an error matching os.ErrDeadlineExceeded
// whose Timeout() is true. A zero t means no deadline. After Close it
// returns an error matching net.ErrClosed.
func (l *Listener) SetDeadline(t time.Time) error {
	if l.l.Closed() {
		return l.opErr("set", net.ErrClosed)
	}
	l.dl.Set(t)
	return nil
}

// Addr returns the listener's name.
func (l *Listener) Addr() net.Addr { return faceAddr(l.l.Addr()) }

// session returns the session's ListenConfig with lc's fields.
func (lc *ListenConfig) session() session.ListenConfig {
	return session.ListenConfig{Transport: lc.Transport.session(), Service: lc.Service, Meta: lc.Meta,
		Backlog: lc.Backlog, PSK: lc.PSK, KeepAlive: lc.KeepAlive}
}

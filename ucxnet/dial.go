package ucxnet

import (
	"context"
	"net"
	"time"

	"github.com/ucxnet/ucxnet/internal/session"
)

// Dialer dials ucxnet names. The zero value dials on the default
// transport.
type Dialer struct {
	// Timeout bounds resolution and handshake; zero means
	// DefaultDialTimeout (or the context's deadline, if sooner).
	Timeout time.Duration
	// Transport to dial from; nil means DefaultTransport.
	Transport *Transport
	// PSK, if set, is a pre-shared key: the dial succeeds only with a
	// listener that proves it knows the same key, and proves it to the
	// listener in turn. Nil means the key in the file $UCXNET_PSK_FILE
	// names, if set.
	PSK []byte
	// KeepAlive, if not zero, replaces the Transport's Config.KeepAlive
	// for the conns this Dialer makes, as net.Dialer.KeepAlive does:
	// how long their peer may stay silent before it is taken for dead
	// (a dial it does not answer fails after twice that). Negative: no
	// ucxnet keepalive for them (UCX's own detection remains). Probes
	// are per peer: a peer is judged by the shortest positive KeepAlive
	// among its conns, at the Transport's sweep interval.
	KeepAlive time.Duration
}

// Dial connects to the listener published as address, on the default
// transport.
func Dial(network, address string) (net.Conn, error) {
	var d Dialer
	return d.DialContext(context.Background(), network, address)
}

// Dial connects to the listener published as address.
func (d *Dialer) Dial(network, address string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, address)
}

// DialContext connects to the listener published as address; the conn is
// a *Conn. network is "ucx", or "tcp", "tcp4" or "tcp6" (net/http always
// passes "tcp"); the address is always a registry name. "host:port" that
// is not a name itself is tried as "host". A name with no live listener
// fails at once with an error matching syscall.ECONNREFUSED.
//
// Its errors are *net.OpError: Op "dial", Net "ucx" (or, for a network
// it does not take, that network), Addr the name dialed, no Source. A
// dial out of time (Timeout, or the context's deadline) is a timeout
// that matches context.DeadlineExceeded, as net's is.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	raddr := Addr{Name: address}
	if err := checkNetwork(network); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: raddr, Err: err}
	}
	sd := d.session()
	if sd.Transport == nil {
		dt, err := DefaultTransport()
		if err != nil {
			return nil, &net.OpError{Op: "dial", Net: Network, Addr: raddr, Err: err}
		}
		sd.Transport = dt.t
	}
	s, err := sd.DialStream(ctx, address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: Network, Addr: raddr, Err: err}
	}
	return newConn(s), nil
}

// checkNetwork accepts the networks Dial takes: "ucx", and "tcp", "tcp4"
// and "tcp6" (net/http's transport and gRPC dial "tcp").
func checkNetwork(network string) error {
	switch network {
	case Network, "tcp", "tcp4", "tcp6":
		return nil
	}
	return net.UnknownNetworkError(network)
}

// session returns the session's Dialer with d's fields.
func (d *Dialer) session() session.Dialer {
	return session.Dialer{Timeout: d.Timeout, Transport: d.Transport.session(), PSK: d.PSK, KeepAlive: d.KeepAlive}
}

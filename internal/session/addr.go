package session

import "net"

// Network is the network name of ucxnet addresses and the one Dial and
// Listen take ("tcp", "tcp4" and "tcp6" are accepted too, so that code such
// as net/http's transport, which always dials "tcp", works unchanged).
const Network = "ucx"

// Addr is a ucxnet address: a name in the registry, and for a conn's end
// the conn's id at that end.
//
// A listener's Addr is the name it published ("echo"), which Dial accepts.
// A conn's LocalAddr and RemoteAddr name both ends as "name:id", the form
// net.SplitHostPort splits (a name containing ':' is bracketed, as
// net.JoinHostPort does for IPv6): the host is the end's transport or
// listener name, the port its conn id in 16 hex digits, e.g.
// "echo:4f1c0a9b2d3e5f60". One end's LocalAddr is the other's RemoteAddr.
// Dial accepts "name:id" too (the id is ignored, as a port is).
type Addr struct {
	Name string
	ID   uint64 // the conn's id at this end; 0: a name only (a listener, or a dial not yet answered)
}

// Network returns "ucx".
func (a Addr) Network() string { return Network }

// String returns the name, or "name:id" for a conn's end.
func (a Addr) String() string {
	if a.ID == 0 {
		return a.Name
	}
	return net.JoinHostPort(a.Name, formatID(a.ID))
}

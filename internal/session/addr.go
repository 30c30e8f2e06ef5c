package session

import "net"

// Network is the network name of ucxnet addresses.
const Network = "ucx"

// Addr is a ucxnet address, a registry name and for a conn's end the
// conn's id at that end. Its fields mean what ucxnet.Addr's do: ucxnet
// converts one to the other, so the two have the same fields in the same
// order.
type Addr struct {
	Name string
	ID   uint64
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

package ucxnet

// Network is the network name of ucxnet addresses and the one Dial and
// Listen take ("tcp", "tcp4" and "tcp6" are accepted too, so that code such
// as net/http's transport, which always dials "tcp", works unchanged).
const Network = "ucx"

// Addr is a ucxnet address: a name in the registry. A listener's Addr is the
// name it published, which Dial accepts. A dialing conn's local Addr names
// its transport, with the conn's id after '#' to make it unique.
type Addr struct {
	Name string
}

// Network returns "ucx".
func (a Addr) Network() string { return Network }

// String returns the name.
func (a Addr) String() string { return a.Name }

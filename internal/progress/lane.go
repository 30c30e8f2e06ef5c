package progress

import "github.com/ucxnet/ucxnet/internal/cucx"

// AddressOffer is what a packed worker address offers a peer, by the
// transports its interface entries name.
type AddressOffer struct {
	SharedMemory bool     // posix, sysv, xpmem, cma or knem: reachable from the same host
	RDMA         bool     // an InfiniBand/RoCE, EFA or uGNI transport
	TCP          bool     // UCX's tcp transport
	Transports   []string // the transports' names, in address order, without repeats
}

// sharedMemoryTLs and rdmaTLs are the transports that beat UCX's tcp to a
// peer: the first on one host, the second between hosts.
var (
	sharedMemoryTLs = map[string]bool{"posix": true, "sysv": true, "xpmem": true, "cma": true, "knem": true}
	rdmaTLs         = map[string]bool{
		"rc_verbs": true, "rc_mlx5": true, "dc_mlx5": true, "ud_verbs": true, "ud_mlx5": true,
		"gga_mlx5": true, "rc_gda": true, "srd": true,
		"ugni_rdma": true, "ugni_smsg": true, "ugni_udt": true,
	}
)

// Offer reads what a packed worker address offers (it works without cgo:
// the address walk is pure Go). An address that does not parse is an
// error wrapping cucx.ErrBadAddress.
func Offer(addr []byte) (AddressOffer, error) {
	entries, err := cucx.AddressTransports(addr)
	if err != nil {
		return AddressOffer{}, err
	}
	var o AddressOffer
	seen := map[string]bool{}
	for _, e := range entries {
		if e.Name == "" || seen[e.Name] {
			continue
		}
		seen[e.Name] = true
		o.Transports = append(o.Transports, e.Name)
		switch {
		case sharedMemoryTLs[e.Name]:
			o.SharedMemory = true
		case rdmaTLs[e.Name]:
			o.RDMA = true
		case e.Name == "tcp":
			o.TCP = true
		}
	}
	return o, nil
}

package cucx

import (
	"errors"
	"fmt"
	"slices"
)

// The transport check: a second look at a packed worker address, after
// ValidateAddress has found its layout sound, at what each interface
// entry claims to be.
//
// UCX keys each interface of a packed address by a 16-bit checksum of its
// transport's name and hands the device and interface address bytes that
// follow to that transport's code (iface_is_reachable, ep_create) without
// looking at their length. A device address of length 0 reaches it as a
// NULL pointer. An attacker that takes the self interface (which packs no
// device address) and gives it tcp's or posix's checksum makes UCX 1.13
// call uct_tcp_iface_is_reachable or uct_sm_iface_is_reachable on NULL
// (tcp_dev_addr->sa_family, uct_iface_local_is_reachable's addr_ns->id):
// a segfault in ucp_ep_create, with UCX choosing its transports. Lengths
// that are too short for what a transport reads are a lie of the same kind
// (the C side pads the copy it hands UCX, so those stay inside memory it
// owns, but they say the address was forged).

// ErrBadTransport is wrapped by every error CheckTransports returns.
var ErrBadTransport = errors.New("ucxnet: worker address names a transport it does not carry")

// tlRule is what one transport packs: the device and interface address
// lengths it may have (nil: any non-zero length).
type tlRule struct {
	dev, iface []int
}

// Local-system address lengths (uct_iface_local_addr_base_t, 8 bytes, or
// uct_iface_local_addr_ns_t with a namespace id in a non-default namespace:
// 16 bytes up to UCX 1.21, 12 from 1.22, whose ucs_sys_ns_t is 32 bits) that the
// shared-memory transports and tcp over loopback pack as their device
// address.
var localAddr = []int{8, 12, 16}

// transportRules lists the UCX transports (1.13 to 1.22, src/uct) and the
// lengths their iface_query reports. Each is keyed by its name's checksum
// (ucs_crc16_string) in transportByCsum.
var transportRules = map[string]tlRule{
	// self: no device address, an 8-byte iface id (uct_self_iface_addr_t).
	"self": {dev: []int{0}, iface: []int{8}},
	// tcp: uct_tcp_device_addr_t (flags, sa_family) followed by an IPv4 or
	// IPv6 address, or by a local-system address over loopback; the iface
	// address is the port.
	"tcp": {dev: []int{2 + 4, 2 + 16, 2 + 8, 2 + 12}, iface: []int{2}},
	// Shared memory (mm): uct_mm_iface_addr_t (the fifo segment id), and
	// for posix a md-specific part.
	"posix": {dev: localAddr, iface: []int{8, 12, 16}},
	"sysv":  {dev: localAddr, iface: []int{8}},
	"xpmem": {dev: localAddr, iface: []int{8, 12, 16}},
	// Single-copy: cma packs the pid (and a namespace id), knem nothing.
	"cma":  {dev: localAddr, iface: []int{4, 8, 12, 16}},
	"knem": {dev: localAddr, iface: []int{0}},
	// Copy engines with no device address and a 64-bit iface id.
	"cuda_copy": {dev: []int{0}, iface: []int{8}},
	"gdr_copy":  {dev: []int{0}, iface: []int{8}},
	"rocm_copy": {dev: []int{0}, iface: []int{8}},
	"rocm_gdr":  {dev: []int{0}, iface: []int{8}},
	"ze_copy":   {dev: []int{0}, iface: []int{8}},
	// The rest read a device address of their own layout: any non-zero
	// length (the C side's padding covers a short one).
	"cuda_ipc": {}, "rocm_ipc": {}, "gaudi_gdr": {},
	"rc_verbs": {}, "rc_mlx5": {}, "dc_mlx5": {}, "ud_verbs": {}, "ud_mlx5": {},
	"gga_mlx5": {}, "rc_gda": {}, "srd": {},
	"ugni_rdma": {}, "ugni_smsg": {}, "ugni_udt": {},
}

// transportByCsum maps ucs_crc16_string(name) to name.
var transportByCsum = func() map[uint16]string {
	m := make(map[uint16]string, len(transportRules))
	for name := range transportRules {
		m[crc16String(name)] = name
	}
	return m
}()

// TransportChecksum returns the checksum UCX packs for the transport
// name (ucs_crc16_string).
func TransportChecksum(name string) uint16 { return crc16String(name) }

// crc16String is UCX's ucs_crc16_string: CRC-16 with the reflected CCITT
// polynomial 0x8408, initial value 0xffff, inverted at the end.
func crc16String(s string) uint16 {
	crc := uint16(0xffff)
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i])
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0x8408
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}

// TransportEntry is one interface of a packed worker address, as
// CheckTransports reads it.
type TransportEntry struct {
	Csum     uint16 // ucs_crc16_string of the transport's name
	Name     string // the transport's name ("" if the checksum is unknown)
	DevLen   int    // device address length
	IfaceLen int    // interface address length

	ifaceAddr []byte // the interface address itself
}

// CheckTransports checks, for an address ValidateAddress accepted, that
// every interface entry names a transport UCX has (by its name's
// checksum) and carries device and interface addresses of the lengths
// that transport packs. The progress engine calls it before every
// ucp_ep_create from an address. Every error wraps ErrBadTransport (or
// ErrBadAddress for a layout it cannot walk).
func CheckTransports(addr []byte) error {
	entries, err := AddressTransports(addr)
	if err != nil {
		return err
	}
	for i, e := range entries {
		if e.Name == "" {
			return fmt.Errorf("%w: interface %d has checksum %#04x, no transport's", ErrBadTransport, i, e.Csum)
		}
		r := transportRules[e.Name]
		switch {
		case r.dev == nil && e.DevLen == 0,
			r.dev != nil && !slices.Contains(r.dev, e.DevLen):
			return fmt.Errorf("%w: interface %d (%s) with a %d-byte device address", ErrBadTransport, i, e.Name, e.DevLen)
		case r.iface != nil && !slices.Contains(r.iface, e.IfaceLen):
			return fmt.Errorf("%w: interface %d (%s) with a %d-byte interface address", ErrBadTransport, i, e.Name, e.IfaceLen)
		}
		if err := checkSegmentID(e); err != nil {
			return fmt.Errorf("interface %d: %w", i, err)
		}
	}
	return nil
}

// AddressTransports lists the interface entries of a packed worker
// address, in order, as ValidateAddress reads it; an address it rejects is
// an error wrapping ErrBadAddress.
func AddressTransports(addr []byte) ([]TransportEntry, error) {
	info, err := validateAddress(addr)
	if err != nil {
		return nil, err
	}
	return info.entries, nil
}

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

// Local-system address lengths (uct_iface_local_addr_base_t, or _ns_t in a
// non-default namespace) that the shared-memory transports and tcp over
// loopback pack as their device address.
var localAddr = []int{8, 16}

// transportRules lists the UCX transports (1.13 to 1.22, src/uct) and the
// lengths their iface_query reports. Each is keyed by its name's checksum
// (ucs_crc16_string) in transportByCsum.
var transportRules = map[string]tlRule{
	// self: no device address, an 8-byte iface id (uct_self_iface_addr_t).
	"self": {dev: []int{0}, iface: []int{8}},
	// tcp: uct_tcp_device_addr_t (flags, sa_family) followed by an IPv4 or
	// IPv6 address, or by a local-system address over loopback; the iface
	// address is the port.
	"tcp": {dev: []int{2 + 4, 2 + 16, 2 + 8}, iface: []int{2}},
	// Shared memory (mm): uct_mm_iface_addr_t (the fifo segment id), and
	// for posix a md-specific part.
	"posix": {dev: localAddr, iface: []int{8, 16}},
	"sysv":  {dev: localAddr, iface: []int{8}},
	"xpmem": {dev: localAddr, iface: []int{8, 16}},
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
	}
	return nil
}

// AddressTransports lists the interface entries of a packed worker
// address (UCX 1.13 to 1.22 layouts: v1, with or without the release
// pseudo-device, and v2). It never reads outside addr; an address it
// cannot walk is an error wrapping ErrBadAddress. It walks the layout on
// its own (ValidateAddress judges it): only the lengths matter here.
func AddressTransports(addr []byte) ([]TransportEntry, error) {
	r := &tlReader{b: addr}
	h := r.byte()
	version, flags := h&0x0f, h>>4
	switch version {
	case 0: // v1
	case 1: // v2: the upper nibble holds the release version since UCX 1.16
		r.v2 = true
		flags = r.byte()
	default:
		return nil, badTL(0, "unknown address version %d", version)
	}
	if !r.v2 || flags&tlHdrUUID != 0 {
		r.skip(8)
	}
	if flags&tlHdrClientID != 0 {
		r.skip(8)
	}
	if flags&tlHdrDebug != 0 {
		r.skip(int(r.byte()))
	}
	if r.err == nil && r.off < len(addr) && addr[r.off] == 0xff { // UCP_NULL_RESOURCE: no devices
		return nil, nil
	}
	var out []TransportEntry
	for r.err == nil {
		mdb := r.byte()
		if r.v2 && mdb&0x7f == 0x7f {
			r.byte() // extended md index
		}
		db := r.byte()
		devLen := r.ext(db, 0x1f)
		if db&0x40 != 0 { // number of paths
			r.byte()
		}
		if db&0x20 != 0 { // system device
			r.byte()
		}
		r.skip(devLen)
		for last := mdb&0x80 != 0; !last && r.err == nil; { // 0x80: an empty (pseudo-)device
			if len(out) >= 64 {
				return nil, badTL(r.off, "more than 64 transport entries")
			}
			cs := r.skip(2)
			r.skip(tlAttrLen(r.v2))
			lb := r.byte()
			if lb&0x40 != 0 {
				return nil, badTL(r.off-1, "endpoint addresses in a worker address")
			}
			ifLen := r.ext(lb, 0x3f)
			r.skip(ifLen)
			if r.err == nil {
				csum := uint16(cs[0]) | uint16(cs[1])<<8
				out = append(out, TransportEntry{Csum: csum, Name: transportByCsum[csum], DevLen: devLen, IfaceLen: ifLen})
			}
			last = lb&0x80 != 0
		}
		if db&0x80 != 0 && r.err == nil {
			return out, nil
		}
	}
	return nil, r.err
}

// Header flags of a packed address (UCP_ADDRESS_HEADER_FLAG_*).
const (
	tlHdrDebug    = 1 << 0
	tlHdrUUID     = 1 << 1
	tlHdrClientID = 1 << 2
)

// tlAttrLen is the size of an interface's packed attributes.
func tlAttrLen(v2 bool) int {
	if v2 {
		return 8
	}
	return 16
}

func badTL(off int, format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrBadAddress, off, fmt.Sprintf(format, args...))
}

// tlReader walks a packed address; the first read past its end sets err,
// and every read after that returns zeros.
type tlReader struct {
	b   []byte
	off int
	v2  bool
	err error
}

func (r *tlReader) skip(n int) []byte {
	if r.err != nil {
		return make([]byte, max(n, 0))
	}
	if n < 0 || len(r.b)-r.off < n {
		r.err = badTL(r.off, "truncated: %d bytes wanted, %d left", n, len(r.b)-r.off)
		return make([]byte, max(n, 0))
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

func (r *tlReader) byte() byte { return r.skip(1)[0] }

// ext reads a length packed in the low bits of first; in v2 a value equal
// to mask continues in the next byte.
func (r *tlReader) ext(first, mask byte) int {
	v := first & mask
	if r.v2 && v == mask {
		return int(r.byte())
	}
	return int(v)
}

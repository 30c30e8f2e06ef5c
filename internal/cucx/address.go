package cucx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrBadAddress is wrapped by every error ValidateAddress returns: the
// bytes are not a packed UCX 1.13 worker address that UCX can be trusted to
// parse.
var ErrBadAddress = errors.New("ucxnet: malformed UCX worker address")

// MaxAddressLen is the longest packed worker address ValidateAddress
// accepts. Real ones are a few hundred bytes (79 B tcp, 116 B sm here,
// ~240 B on InfiniBand).
const MaxAddressLen = 8192

// Limits of UCX 1.13 that an address must respect.
const (
	addrMaxResources = 64 // tl entries (UCP_MAX_RESOURCES bounds the unpacked list)
	addrMaxMDs       = 64 // md index: UCX keeps remote MDs in a 64-bit map
)

// Layout constants from UCX 1.13's src/ucp/wireup/address.c.
const (
	addrVersionV1 = 0 // UCP_OBJECT_VERSION_V1 (default, UCX_ADDRESS_VERSION=v1)
	addrVersionV2 = 1 // UCP_OBJECT_VERSION_V2 (UCX_ADDRESS_VERSION=v2)

	addrHdrDebugInfo  = 1 << 0 // worker name follows the ids
	addrHdrWorkerUUID = 1 << 1
	addrHdrClientID   = 1 << 2
	addrHdrAMOnly     = 1 << 3
	addrHdrKnown      = addrHdrDebugInfo | addrHdrWorkerUUID | addrHdrClientID | addrHdrAMOnly

	addrNullResource = 0xff // UCP_NULL_RESOURCE: an empty device list

	addrFlagLast      = 0x80 // last device / last iface of a device
	addrFlagHasEPAddr = 0x40 // iface: endpoint addresses follow
	addrFlagNumPaths  = 0x40 // device: a number-of-paths byte follows
	addrFlagSysDevice = 0x20 // device: a system-device byte follows

	addrIfaceLenMask  = 0x3f // UCP_ADDRESS_IFACE_LEN_MASK
	addrDeviceLenMask = 0x1f // UCP_ADDRESS_DEVICE_LEN_MASK
	addrMDEmptyDev    = 0x80
	addrMDMaskV1      = 0x1f // UCP_ADDRESS_FLAG_MD_MASK_V1
	addrMDMaskV2      = 0x7f // UCP_ADDRESS_FLAG_MD_MASK

	addrIfaceAttrV1 = 16 // ucp_address_packed_iface_attr_t: 3 floats + uint32
	addrIfaceAttrV2 = 8  // ucp_address_v2_packed_iface_attr_t: 3 fp8, prio, u16 seg, u16 flags
)

func badAddr(off int, format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrBadAddress, off, fmt.Sprintf(format, args...))
}

// addrReader walks a packed address, never past its end.
type addrReader struct {
	b   []byte
	off int
}

func (r *addrReader) need(n int, what string) error {
	if n < 0 || len(r.b)-r.off < n {
		return badAddr(r.off, "truncated: %s needs %d bytes, %d left", what, n, len(r.b)-r.off)
	}
	return nil
}

func (r *addrReader) byte(what string) (byte, error) {
	if err := r.need(1, what); err != nil {
		return 0, err
	}
	c := r.b[r.off]
	r.off++
	return c, nil
}

func (r *addrReader) skip(n int, what string) ([]byte, error) {
	if err := r.need(n, what); err != nil {
		return nil, err
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p, nil
}

// extended reads a value packed in the low bits of first (masked by mask).
// With address v2, a value equal to mask means the real value is the next
// byte (ucp_address_unpack_byte_extended); the packer only does that for
// values >= mask, so anything smaller there is not canonical.
func (r *addrReader) extended(first byte, mask byte, v2 bool, what string) (int, error) {
	v := first & mask
	if !v2 || v != mask {
		return int(v), nil
	}
	at := r.off
	x, err := r.byte(what + " (extended)")
	if err != nil {
		return 0, err
	}
	if x < mask {
		return 0, badAddr(at, "%s extension %d below %d", what, x, mask)
	}
	return int(x), nil
}

// ValidateAddress checks that addr is a packed UCP worker address in the
// layout UCX 1.13 writes (ucp_worker_get_address, address version v1 or
// v2, non-unified mode) and reads (ucp_address_unpack), before it is handed
// to ucp_ep_create: UCX 1.13 trusts the bytes and aborts the process, or
// reads past the buffer, on many malformed ones. It is pure Go and never
// reads outside addr.
//
// It accepts only what UCX 1.13 itself would produce for a worker address:
//   - a header with a known version (v1: 1 byte, flags in the high nibble;
//     v2: 2 bytes) and only the known flags (debug info, worker uuid,
//     client id, AM only); v1 always carries the 8-byte worker uuid;
//   - the optional client id (8 bytes) and worker name (length-prefixed);
//   - at least one device, the last marked LAST, each with an md index
//     below 64, no EMPTY flag, a canonical device-address length, an
//     optional path count (>= 2) and system device (!= 255);
//   - per device one or more interfaces, the last marked LAST, each with
//     a 2-byte transport checksum, its attributes (v1: finite, non-negative
//     floats and a positive bandwidth; v2: any) and a canonical
//     iface-address length; no endpoint addresses (a worker address has
//     none);
//   - at most 64 interfaces in all, nothing left over at the end, and at
//     most MaxAddressLen bytes.
//
// A peer whose UCX runs in unified mode (UCX_UNIFIED_MODE=y) packs a
// different layout, which is rejected. The transport-specific device and
// iface address bytes are opaque here; the C side copies the address into
// a zero-padded buffer so that a transport reading its fixed-size address
// past a lying length stays inside memory it owns.
//
// Every error wraps ErrBadAddress.
func ValidateAddress(addr []byte) error {
	if len(addr) == 0 {
		return fmt.Errorf("%w: empty", ErrBadAddress)
	}
	if len(addr) > MaxAddressLen {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrBadAddress, len(addr), MaxAddressLen)
	}
	r := &addrReader{b: addr}

	// Header: ucp_address_unpack_header.
	h, _ := r.byte("header")
	version := h & 0x0f
	var flags byte
	switch version {
	case addrVersionV1:
		flags = h >> 4
	case addrVersionV2:
		if h>>4 != 0 {
			return badAddr(0, "unknown bits 0x%02x in the v2 header byte", h&0xf0)
		}
		f, err := r.byte("v2 header flags")
		if err != nil {
			return err
		}
		flags = f
	default:
		// UCX 1.13 aborts on this one (ucs_assertv_always on the version).
		return badAddr(0, "unknown address version %d", version)
	}
	if flags&^addrHdrKnown != 0 {
		return badAddr(r.off-1, "unknown header flags 0x%02x", flags&^addrHdrKnown)
	}
	v2 := version == addrVersionV2

	// Worker uuid: v1 always has it (UCX unpacks it for v1 whatever the
	// flag says), v2 only with the flag.
	if !v2 || flags&addrHdrWorkerUUID != 0 {
		if _, err := r.skip(8, "worker uuid"); err != nil {
			return err
		}
	}
	if flags&addrHdrClientID != 0 {
		if _, err := r.skip(8, "client id"); err != nil {
			return err
		}
	}
	if flags&addrHdrDebugInfo != 0 {
		n, err := r.byte("worker name length")
		if err != nil {
			return err
		}
		if _, err := r.skip(int(n), "worker name"); err != nil {
			return err
		}
	}

	first, err := r.byte("first device")
	if err != nil {
		return err
	}
	if first == addrNullResource {
		return badAddr(r.off-1, "no transports in the address")
	}
	r.off--

	mdMask := byte(addrMDMaskV1)
	attrLen := addrIfaceAttrV1
	if v2 {
		mdMask = addrMDMaskV2
		attrLen = addrIfaceAttrV2
	}
	ifaces := 0
	for dev := 0; ; dev++ {
		// md index and flags: ucp_address_unpack_md_info.
		at := r.off
		mdb, err := r.byte("md index")
		if err != nil {
			return err
		}
		if mdb&addrMDEmptyDev != 0 {
			return badAddr(at, "device %d is marked empty", dev)
		}
		md, err := r.extended(mdb, mdMask, v2, "md index")
		if err != nil {
			return err
		}
		if md >= addrMaxMDs {
			return badAddr(at, "device %d: md index %d out of range", dev, md)
		}

		// device address length and flags.
		db, err := r.byte("device address length")
		if err != nil {
			return err
		}
		lastDev := db&addrFlagLast != 0
		devLen, err := r.extended(db, addrDeviceLenMask, v2, "device address length")
		if err != nil {
			return err
		}
		if db&addrFlagNumPaths != 0 {
			at := r.off
			n, err := r.byte("number of paths")
			if err != nil {
				return err
			}
			if n < 2 {
				return badAddr(at, "device %d: %d paths", dev, n)
			}
		}
		if db&addrFlagSysDevice != 0 {
			at := r.off
			s, err := r.byte("system device")
			if err != nil {
				return err
			}
			if s == 0xff {
				return badAddr(at, "device %d: unknown system device packed", dev)
			}
		}
		if _, err := r.skip(devLen, "device address"); err != nil {
			return err
		}

		// Interfaces of this device.
		for {
			if ifaces >= addrMaxResources {
				return badAddr(r.off, "more than %d transport entries", addrMaxResources)
			}
			ifaces++
			if _, err := r.skip(2, "transport name checksum"); err != nil {
				return err
			}
			at := r.off
			attr, err := r.skip(attrLen, "interface attributes")
			if err != nil {
				return err
			}
			if err := checkIfaceAttr(attr, v2); err != nil {
				return badAddr(at, "interface %d: %v", ifaces-1, err)
			}
			at = r.off
			lb, err := r.byte("interface address length")
			if err != nil {
				return err
			}
			if lb&addrFlagHasEPAddr != 0 {
				return badAddr(at, "interface %d carries endpoint addresses (not a worker address)", ifaces-1)
			}
			ifLen, err := r.extended(lb, addrIfaceLenMask, v2, "interface address length")
			if err != nil {
				return err
			}
			if _, err := r.skip(ifLen, "interface address"); err != nil {
				return err
			}
			if lb&addrFlagLast != 0 {
				break
			}
		}
		if lastDev {
			break
		}
	}
	if r.off != len(addr) {
		return badAddr(r.off, "%d bytes of trailing garbage", len(addr)-r.off)
	}
	return nil
}

func checkIfaceAttr(a []byte, v2 bool) error {
	if v2 {
		// overhead, bandwidth, latency (fp8), prio, seg_size, flags: any
		// value unpacks (UCX itself rejects a non-positive bandwidth).
		return nil
	}
	overhead := math.Float32frombits(binary.LittleEndian.Uint32(a[0:]))
	bw := math.Float32frombits(binary.LittleEndian.Uint32(a[4:]))
	lat := math.Float32frombits(binary.LittleEndian.Uint32(a[8:]))
	for _, f := range []float32{overhead, bw, lat} {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return errors.New("non-finite performance attribute")
		}
	}
	if bw <= 0 {
		return fmt.Errorf("bandwidth %g", bw)
	}
	if overhead < 0 || lat < 0 {
		return errors.New("negative overhead or latency")
	}
	return nil
}

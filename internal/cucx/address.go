package cucx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrBadAddress is wrapped by every error ValidateAddress returns: the
// bytes are not a packed UCX worker address, in a layout of a UCX release
// this package knows, that UCX can be trusted to parse.
var ErrBadAddress = errors.New("ucxnet: malformed UCX worker address")

// MaxAddressLen is the longest packed worker address ValidateAddress
// accepts. Real ones are a few hundred bytes (79 B tcp, 116 B sm here,
// ~240 B on InfiniBand).
const MaxAddressLen = 8192

// KnownReleases names the UCX releases whose packed worker address layouts
// ValidateAddress knows (their address.c is the reference).
const KnownReleases = "1.13–1.22"

// Limits of UCX that an address must respect.
const (
	addrMaxResources = 64 // tl entries (UCP_MAX_RESOURCES bounds the unpacked list)
	addrMaxMDs       = 64 // md index: UCX keeps remote MDs in a 64-bit map
)

// Layout constants from UCX's src/ucp/wireup/address.c (1.13 to 1.22).
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
	addrMDEmptyDev    = 0x80 // UCP_ADDRESS_FLAG_MD_EMPTY_DEV
	addrMDMaskV1      = 0x1f // md index bits of a v1 md byte up to 1.18 (0x60: legacy MD flags)
	addrMDMaskV2      = 0x7f // UCP_ADDRESS_FLAG_MD_MASK (v2; v1 from 1.19 on)
	addrMDLegacyBits  = 0x60 // UCP_ADDRESS_FLAG_MD_INDEX_LEGACY_BITS (v1 up to 1.18)

	// Since 1.16 a release's minor version, modulo 16, travels in the
	// address: in the v2 header's high nibble, and in v1 as the md index
	// of an empty pseudo-device packed after the real ones
	// (UCP_ADDRESS_PACK_FLAG_RELEASE_VER_V1). Its 3 bits above the version
	// are reserved.
	addrReleaseMask     = 0x0f
	addrReleaseReserved = 0x70
	addrLegacyMDRelease = 18 // the last release that packs legacy bits in v1 md bytes

	addrIfaceAttrV1 = 16 // ucp_address_packed_iface_attr_t: 3 floats + uint32
	addrIfaceAttrV2 = 8  // ucp_address_v2_packed_iface_attr_t: 3 fp8, prio, u16 seg, u16 flags
)

// releaseMinor turns a packed 4-bit release version into the UCX 1.x minor
// version it most likely stands for: 13–15 as themselves, 0–12 as 16–28
// (releases before 1.16 pack none, so 0 means 1.16 where a version is
// packed at all).
func releaseMinor(nibble byte) int {
	if nibble >= 13 {
		return int(nibble)
	}
	return int(nibble) + 16
}

func badAddr(off int, format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrBadAddress, off, fmt.Sprintf(format, args...))
}

// addrReader walks a packed address, never past its end.
type addrReader struct {
	b   []byte
	off int
	v2  bool
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

// addrInfo is what ValidateAddress learnt of an address on the way.
type addrInfo struct {
	v2      bool
	release int  // the packer's UCX minor version; 0: not packed (before 1.16)
	mdHigh  bool // a v1 md byte had bit 0x40 set (legacy flag, or an index >= 64 from 1.19 on)
	entries []TransportEntry
	devices []addrDevice // where each device lies in the address, in order
}

// addrDevice is where one device entry lies in a packed address: bytes
// [start, end), its flags byte (the device address length, whose
// addrFlagLast marks the last device) at flagsAt, and its interfaces. The
// release pseudo-device (v1 from 1.16 on) has release set and no
// interfaces.
type addrDevice struct {
	start, end, flagsAt int
	release             bool
	ifaces              []addrIface
}

// addrIface is where one interface entry lies: bytes [start, end), its
// flags byte (the interface address length, whose addrFlagLast marks the
// device's last interface) at flagsAt, and its entry in addrInfo.entries.
type addrIface struct {
	start, end, flagsAt, entry int
}

// ValidateAddress checks that addr is a packed UCP worker address in a
// layout that UCX 1.13 to 1.22 write (ucp_worker_get_address, address
// version v1 or v2, non-unified mode) and read (ucp_address_unpack), before
// it is handed to ucp_ep_create: UCX trusts the bytes and aborts the
// process (an assertion on the version, kept in release builds), or reads
// past the buffer, on many malformed ones; it has no length-checked
// unpack. It is pure Go and never reads outside addr.
//
// It accepts only what one of those releases would produce for a worker
// address:
//   - a header with a known version (v1: 1 byte, flags in the high nibble;
//     v2: 2 bytes, the packer's release version in the first byte's high
//     nibble since 1.16) and only the known flags (debug info, worker
//     uuid, client id, AM only); v1 always carries the 8-byte worker uuid;
//   - the optional client id (8 bytes) and worker name (length-prefixed);
//   - at least one device, the last marked LAST, each with an md index
//     below 64, a canonical device-address length, an optional path count
//     (>= 2) and system device (!= 255); in v1 from 1.16 on, after them,
//     the empty pseudo-device that carries the release version (its md
//     byte 0x80 | version, its device byte LAST and nothing else), which
//     is the only empty device a worker address has;
//   - per real device one or more interfaces, the last marked LAST, each
//     with a 2-byte transport checksum, its attributes (v1: finite,
//     non-negative floats and a positive bandwidth; v2: any) and a
//     canonical iface-address length; no endpoint addresses (a worker
//     address has none);
//   - at most 64 interfaces in all, nothing left over at the end, and at
//     most MaxAddressLen bytes.
//
// A layout it does not know gets an error that says which UCX release
// packed the address when the address tells (a newer one than
// KnownReleases, say). A peer whose UCX runs in unified mode
// (UCX_UNIFIED_MODE=y) packs a different layout, which is rejected. The
// transport-specific device and iface address bytes are opaque here; the C
// side copies the address into a zero-padded buffer so that a transport
// reading its fixed-size address past a lying length stays inside memory
// it owns.
//
// Every error wraps ErrBadAddress.
func ValidateAddress(addr []byte) error {
	_, err := validateAddress(addr)
	return err
}

// AddressRelease returns the UCX release ("1.18") that packed addr, as far
// as the address says: releases from 1.16 on pack their minor version
// modulo 16; older ones, and addresses ValidateAddress rejects, give "".
func AddressRelease(addr []byte) string {
	info, err := validateAddress(addr)
	if err != nil || info.release == 0 {
		return ""
	}
	return fmt.Sprintf("1.%d", info.release)
}

func validateAddress(addr []byte) (addrInfo, error) {
	var info addrInfo
	if len(addr) == 0 {
		return info, fmt.Errorf("%w: empty", ErrBadAddress)
	}
	if len(addr) > MaxAddressLen {
		return info, fmt.Errorf("%w: %d bytes, more than %d", ErrBadAddress, len(addr), MaxAddressLen)
	}
	r := &addrReader{b: addr}
	if err := readAddrHeader(r, &info); err != nil {
		return info, err
	}
	first, err := r.byte("first device")
	if err != nil {
		return info, err
	}
	if first == addrNullResource {
		return info, badAddr(r.off-1, "no transports in the address")
	}
	r.off--
	for dev := 0; ; dev++ {
		last, err := readAddrDevice(r, &info, dev)
		if err != nil {
			return info, laterRelease(info, err)
		}
		if last {
			break
		}
	}
	if r.off != len(addr) {
		return info, laterRelease(info, badAddr(r.off, "%d bytes of trailing garbage", len(addr)-r.off))
	}
	if info.mdHigh && info.release > addrLegacyMDRelease {
		// From 1.19 on bit 0x40 of a v1 md byte is part of the index,
		// which would then be 64 or more.
		return info, badAddr(0, "md index of 64 or more in a UCX 1.%d address", info.release)
	}
	return info, nil
}

// laterRelease adds to err that the address comes from a UCX release newer
// than the layouts known here, when it says so.
func laterRelease(info addrInfo, err error) error {
	if info.release > 22 {
		return fmt.Errorf("%w (the address was packed by UCX 1.%d, newer than the UCX %s layouts this build knows)", err, info.release, KnownReleases)
	}
	return err
}

// readAddrHeader reads the header, ids and worker name
// (ucp_address_unpack_header and what follows it).
func readAddrHeader(r *addrReader, info *addrInfo) error {
	h, _ := r.byte("header")
	var flags byte
	switch h & 0x0f {
	case addrVersionV1:
		flags = h >> 4
	case addrVersionV2:
		r.v2, info.v2 = true, true
		if rel := h >> 4; rel != 0 {
			info.release = releaseMinor(rel)
		}
		f, err := r.byte("v2 header flags")
		if err != nil {
			return err
		}
		flags = f
	default:
		// UCX aborts on this one (ucs_assertv_always on the version).
		return badAddr(0, "unknown address version %d (UCX %s pack 0 or 1; a newer UCX release?)", h&0x0f, KnownReleases)
	}
	if flags&^addrHdrKnown != 0 {
		return laterRelease(*info, badAddr(r.off-1, "unknown header flags 0x%02x", flags&^addrHdrKnown))
	}
	// Worker uuid: v1 always has it (UCX unpacks it for v1 whatever the
	// flag says), v2 only with the flag.
	if !r.v2 || flags&addrHdrWorkerUUID != 0 {
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
	return nil
}

// readAddrDevice reads device number dev and its interfaces; it reports
// whether that was the last device.
func readAddrDevice(r *addrReader, info *addrInfo, dev int) (bool, error) {
	// md index and flags: ucp_address_unpack_md_info.
	at := r.off
	mdb, err := r.byte("md index")
	if err != nil {
		return false, err
	}
	if mdb&addrMDEmptyDev != 0 {
		if err := readReleaseDevice(r, info, mdb, dev); err != nil {
			return false, err
		}
		info.devices = append(info.devices, addrDevice{start: at, end: r.off, flagsAt: r.off - 1, release: true})
		return true, nil
	}
	d := addrDevice{start: at}
	mdMask := byte(addrMDMaskV1)
	if r.v2 {
		mdMask = addrMDMaskV2
	} else if mdb&0x40 != 0 {
		info.mdHigh = true
	}
	md, err := r.extended(mdb, mdMask, r.v2, "md index")
	if err != nil {
		return false, err
	}
	if md >= addrMaxMDs {
		return false, badAddr(at, "device %d: md index %d out of range", dev, md)
	}

	// device address length and flags.
	d.flagsAt = r.off
	db, err := r.byte("device address length")
	if err != nil {
		return false, err
	}
	devLen, err := r.extended(db, addrDeviceLenMask, r.v2, "device address length")
	if err != nil {
		return false, err
	}
	if db&addrFlagNumPaths != 0 {
		at := r.off
		n, err := r.byte("number of paths")
		if err != nil {
			return false, err
		}
		if n < 2 {
			return false, badAddr(at, "device %d: %d paths", dev, n)
		}
	}
	if db&addrFlagSysDevice != 0 {
		at := r.off
		s, err := r.byte("system device")
		if err != nil {
			return false, err
		}
		if s == 0xff {
			return false, badAddr(at, "device %d: unknown system device packed", dev)
		}
	}
	if _, err := r.skip(devLen, "device address"); err != nil {
		return false, err
	}
	for {
		i := addrIface{start: r.off, entry: len(info.entries)}
		last, err := readAddrIface(r, info, devLen, &i.flagsAt)
		if err != nil {
			return false, err
		}
		i.end = r.off
		d.ifaces = append(d.ifaces, i)
		if last {
			d.end = r.off
			info.devices = append(info.devices, d)
			return db&addrFlagLast != 0, nil
		}
	}
}

// readReleaseDevice checks the empty pseudo-device whose md byte mdb
// (already read) carries the packer's release version: only in v1, only
// after a real device, and then the last, with a bare LAST device byte.
func readReleaseDevice(r *addrReader, info *addrInfo, mdb byte, dev int) error {
	at := r.off - 1
	switch {
	case r.v2:
		return badAddr(at, "device %d is marked empty (v2 addresses carry no release device)", dev)
	case dev == 0:
		return badAddr(at, "device 0 is marked empty: no transports in the address")
	case mdb&addrReleaseReserved != 0:
		info.release = releaseMinor(mdb & addrReleaseMask)
		return laterRelease(*info, badAddr(at, "release device with reserved bits 0x%02x set", mdb&addrReleaseReserved))
	}
	info.release = releaseMinor(mdb & addrReleaseMask)
	db, err := r.byte("release device flags")
	if err != nil {
		return err
	}
	if db != addrFlagLast {
		return laterRelease(*info, badAddr(r.off-1, "release device byte 0x%02x, want 0x%02x (last, no address)", db, addrFlagLast))
	}
	return nil
}

// readAddrIface reads one interface entry of a device whose address is
// devLen bytes long, setting *flagsAt to where its flags byte lies; it
// reports whether it was the device's last.
func readAddrIface(r *addrReader, info *addrInfo, devLen int, flagsAt *int) (bool, error) {
	n := len(info.entries)
	if n >= addrMaxResources {
		return false, badAddr(r.off, "more than %d transport entries", addrMaxResources)
	}
	cs, err := r.skip(2, "transport name checksum")
	if err != nil {
		return false, err
	}
	attrLen := addrIfaceAttrV1
	if r.v2 {
		attrLen = addrIfaceAttrV2
	}
	at := r.off
	attr, err := r.skip(attrLen, "interface attributes")
	if err != nil {
		return false, err
	}
	if err := checkIfaceAttr(attr, r.v2); err != nil {
		return false, badAddr(at, "interface %d: %v", n, err)
	}
	at = r.off
	*flagsAt = at
	lb, err := r.byte("interface address length")
	if err != nil {
		return false, err
	}
	if lb&addrFlagHasEPAddr != 0 {
		return false, badAddr(at, "interface %d carries endpoint addresses (not a worker address)", n)
	}
	ifLen, err := r.extended(lb, addrIfaceLenMask, r.v2, "interface address length")
	if err != nil {
		return false, err
	}
	ifAddr, err := r.skip(ifLen, "interface address")
	if err != nil {
		return false, err
	}
	csum := binary.LittleEndian.Uint16(cs)
	info.entries = append(info.entries, TransportEntry{Csum: csum, Name: transportByCsum[csum], DevLen: devLen, IfaceLen: ifLen, ifaceAddr: ifAddr})
	return lb&addrFlagLast != 0, nil
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

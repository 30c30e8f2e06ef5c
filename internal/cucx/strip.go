package cucx

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Shared memory from a claimed address.
//
// To reach a peer over shared memory, UCX's mm transports attach the
// segment that the peer's address names (SysV shmat of a shmid, or open of
// a posix path that can be /proc/PID/fd/FD) with this process's rights,
// then read descriptors from that FIFO and write where they point; cma
// and knem read and write another process's memory by pid. An address is
// only a claim: one forged by a less privileged local user steers a root
// process into memory and files that user cannot write. So an address
// whose sender the kernel has not vouched for reaches UCX only without
// these interfaces (StripSharedMemory).

// sameHostTransports are the transports that reach a peer through memory
// on this host: shared-memory segments (posix, sysv, xpmem), single-copy
// access to another process (cma, knem) and GPU IPC handles.
var sameHostTransports = map[string]bool{
	"posix": true, "sysv": true, "xpmem": true, "cma": true, "knem": true,
	"cuda_ipc": true, "rocm_ipc": true,
}

// IsSameHostTransport reports whether the UCX transport name reaches its
// peer through memory on this host (shared memory, cma, knem, GPU IPC):
// the interfaces StripSharedMemory removes.
func IsSameHostTransport(name string) bool { return sameHostTransports[name] }

// ErrOnlySharedMemory is returned by StripSharedMemory for an address that
// offers nothing but same-host memory transports.
var ErrOnlySharedMemory = errors.New("ucxnet: worker address offers only shared memory, which an unvouched peer may not use")

// StripSharedMemory returns addr without its same-host memory interfaces
// (IsSameHostTransport), as a packed worker address of the same layout and
// release that UCX reads as the sender's address minus those interfaces: a
// device left with no interface is dropped, and the last interface and
// device flags move to what is now last. An address with none of them is
// returned as it is (the same slice). It fails, wrapping ErrBadAddress,
// for an address ValidateAddress rejects, and with ErrOnlySharedMemory for
// one with no other transport left.
func StripSharedMemory(addr []byte) ([]byte, error) {
	info, err := validateAddress(addr)
	if err != nil {
		return nil, err
	}
	drop := func(i addrIface) bool { return sameHostTransports[info.entries[i.entry].Name] }
	found := false
	for _, d := range info.devices {
		for _, i := range d.ifaces {
			found = found || drop(i)
		}
	}
	if !found {
		return addr, nil
	}
	out := make([]byte, 0, len(addr))
	out = append(out, addr[:info.devices[0].start]...)
	lastDev := -1 // where the flags byte of the last real device kept lies in out
	for _, d := range info.devices {
		if d.release {
			if lastDev < 0 {
				break
			}
			out[lastDev] &^= addrFlagLast
			out = append(out, addr[d.start:d.end]...)
			lastDev = -1
			break
		}
		var kept []addrIface
		for _, i := range d.ifaces {
			if !drop(i) {
				kept = append(kept, i)
			}
		}
		if len(kept) == 0 {
			continue
		}
		if lastDev >= 0 {
			out[lastDev] &^= addrFlagLast
		}
		lastDev = len(out) + d.flagsAt - d.start
		out = append(out, addr[d.start:d.ifaces[0].start]...)
		out[lastDev] |= addrFlagLast
		for n, i := range kept {
			flags := len(out) + i.flagsAt - i.start
			out = append(out, addr[i.start:i.end]...)
			if n == len(kept)-1 {
				out[flags] |= addrFlagLast
			} else {
				out[flags] &^= addrFlagLast
			}
		}
	}
	if len(out) == info.devices[0].start {
		return nil, ErrOnlySharedMemory
	}
	if err := ValidateAddress(out); err != nil {
		return nil, fmt.Errorf("ucxnet: stripping shared memory from a worker address: %w", err)
	}
	return out, nil
}

// The posix transport's segment id flags (src/uct/sm/mm/posix/mm_posix.c,
// 1.13 to 1.22): the id names /proc/PID/fd/FD, or a shm_open name; with
// neither, UCX takes a directory from the address, which the interfaces it
// packs by default do not carry, and UCX 1.13 asserts (dir != NULL).
const (
	posixSegProcFS  = 1 << 63
	posixSegShmOpen = 1 << 62
)

// checkSegmentID checks what UCX reads from the interface address of a
// same-host transport before it attaches anything: a posix FIFO segment
// id must say how to open it.
func checkSegmentID(e TransportEntry) error {
	if e.Name != "posix" || len(e.ifaceAddr) < 8 {
		return nil
	}
	id := binary.LittleEndian.Uint64(e.ifaceAddr)
	if id&(posixSegProcFS|posixSegShmOpen) == 0 {
		return fmt.Errorf("%w: posix segment id %#x names neither a procfs link nor a shm_open name", ErrBadTransport, id)
	}
	return nil
}

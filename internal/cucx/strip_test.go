package cucx

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

func transportNames(t *testing.T, addr []byte) []string {
	t.Helper()
	es, err := AddressTransports(addr)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name)
	}
	return names
}

// TestStripSharedMemoryCaptured: every captured address, of each release
// and layout, loses exactly its same-host interfaces, keeps the others in
// order with their bytes, and stays an address that UCX's layout accepts
// with the same release; an sm-only address is refused.
func TestStripSharedMemoryCaptured(t *testing.T) {
	for name, a := range realAddresses(t) {
		before := transportNames(t, a)
		want := slices.DeleteFunc(slices.Clone(before), IsSameHostTransport)
		got, err := StripSharedMemory(a)
		if len(want) == 0 {
			if !errors.Is(err, ErrOnlySharedMemory) {
				t.Errorf("%s: sm-only address: err %v, want ErrOnlySharedMemory", name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(want) == len(before) {
			if !bytes.Equal(got, a) {
				t.Errorf("%s: nothing to strip, but the address changed", name)
			}
			continue
		}
		if names := transportNames(t, got); !slices.Equal(names, want) {
			t.Errorf("%s: stripped to %v, want %v", name, names, want)
		}
		if err := CheckTransports(got); err != nil {
			t.Errorf("%s: stripped address fails the transport check: %v", name, err)
		}
		if AddressRelease(got) != AddressRelease(a) {
			t.Errorf("%s: release %q became %q", name, AddressRelease(a), AddressRelease(got))
		}
		if again, err := StripSharedMemory(got); err != nil || !bytes.Equal(again, got) {
			t.Errorf("%s: stripping twice changed it again (%v)", name, err)
		}
	}
}

func TestStripSharedMemoryRejectsBadAddress(t *testing.T) {
	for _, a := range [][]byte{nil, {0xff}, bytes.Repeat([]byte{0x41}, 100)} {
		if _, err := StripSharedMemory(a); !errors.Is(err, ErrBadAddress) {
			t.Errorf("%x: err %v, want ErrBadAddress", a, err)
		}
	}
}

// forgePosixSegment returns addr with the posix interface's FIFO segment
// id replaced by id (the first 8 bytes of its interface address).
func forgePosixSegment(t *testing.T, addr []byte, id uint64) []byte {
	t.Helper()
	info, err := validateAddress(addr)
	if err != nil {
		t.Fatal(err)
	}
	out := slices.Clone(addr)
	for _, d := range info.devices {
		for _, i := range d.ifaces {
			if info.entries[i.entry].Name == "posix" {
				binary.LittleEndian.PutUint64(out[i.flagsAt+1:], id)
				return out
			}
		}
	}
	t.Fatal("no posix interface")
	return nil
}

// TestPosixSegmentWithoutModeRejected performs the pre-authentication
// abort on the address level: a posix interface whose segment id has
// neither the procfs nor the shm_open flag makes UCX 1.13 take a directory
// from the address and assert (mm_posix.c, dir != NULL). Real addresses
// carry one of the flags; a forged one is refused before UCX sees it.
func TestPosixSegmentWithoutModeRejected(t *testing.T) {
	for name, a := range realAddresses(t) {
		if !slices.Contains(transportNames(t, a), "posix") {
			continue
		}
		forged := forgePosixSegment(t, a, 0x1234)
		if err := ValidateAddress(forged); err != nil {
			t.Fatalf("%s: the forgery should keep the layout: %v", name, err)
		}
		if err := CheckTransports(forged); !errors.Is(err, ErrBadTransport) {
			t.Errorf("%s: posix segment id without a mode: err %v, want ErrBadTransport", name, err)
		}
		if _, err := StripSharedMemory(forged); err != nil && !errors.Is(err, ErrOnlySharedMemory) {
			t.Errorf("%s: stripping the forgery: %v", name, err)
		}
	}
}

// TestSysvRelabelledAsPosixRejected: the sysv interface (an 8-byte shmid)
// given posix's checksum has a posix interface's lengths, but its id has
// no posix mode flag: refused before UCX would assert on it.
func TestSysvRelabelledAsPosixRejected(t *testing.T) {
	for name, a := range realAddresses(t) {
		info, err := validateAddress(a)
		if err != nil {
			t.Fatal(err)
		}
		forged := slices.Clone(a)
		n := 0
		for _, d := range info.devices {
			for _, i := range d.ifaces {
				if info.entries[i.entry].Name == "sysv" {
					binary.LittleEndian.PutUint16(forged[i.start:], TransportChecksum("posix"))
					n++
				}
			}
		}
		if n == 0 {
			continue
		}
		if err := CheckTransports(forged); !errors.Is(err, ErrBadTransport) {
			t.Errorf("%s: sysv relabelled as posix: err %v, want ErrBadTransport", name, err)
		}
	}
}

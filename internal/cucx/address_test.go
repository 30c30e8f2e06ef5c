package cucx

import (
	"encoding/hex"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// realAddresses returns the packed worker addresses captured from real
// UCX 1.13.1 workers into testdata/addr (tcp, sm, address v2, debug info;
// regenerate with CUCX_UPDATE_TESTDATA=1 go test -run TestRealAddressesValidate).
func realAddresses(t testing.TB) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "addr", "*.hex"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no captured addresses: %v", err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		a, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".hex")] = a
	}
	return out
}

func TestValidateAddressCaptured(t *testing.T) {
	for name, a := range realAddresses(t) {
		if err := ValidateAddress(a); err != nil {
			t.Errorf("%s (%d B): %v", name, len(a), err)
		}
	}
}

func mustReject(t *testing.T, name string, a []byte) {
	t.Helper()
	err := ValidateAddress(a)
	if err == nil {
		t.Errorf("%s: accepted %x", name, a)
		return
	}
	if !errors.Is(err, ErrBadAddress) {
		t.Errorf("%s: error %v does not wrap ErrBadAddress", name, err)
	}
}

func TestValidateAddressRejects(t *testing.T) {
	random := make([]byte, 200)
	rand.New(rand.NewSource(1)).Read(random)
	mustReject(t, "empty", nil)
	mustReject(t, "ff", []byte{0xff})
	mustReject(t, "random200", random)
	mustReject(t, "too long", make([]byte, MaxAddressLen+1))
	for name, real := range realAddresses(t) {
		flipped := append([]byte(nil), real...)
		for i := 0; i < 4; i++ {
			flipped[i] ^= 0xff
		}
		mustReject(t, name+"/flipped4", flipped)
		mustReject(t, name+"/zeroed", make([]byte, len(real)))
		for n := 0; n < len(real); n++ {
			mustReject(t, name+"/truncated", real[:n])
		}
		mustReject(t, name+"/trailing", append(append([]byte(nil), real...), 0))
		// Every header version UCX 1.13 does not know (it asserts on them).
		for v := byte(2); v < 16; v++ {
			m := append([]byte(nil), real...)
			m[0] = m[0]&0xf0 | v
			mustReject(t, name+"/version", m)
		}
		// The same address with any unknown v2 header flag.
		if real[0]&0x0f == addrVersionV2 {
			for bit := 4; bit < 8; bit++ {
				m := append([]byte(nil), real...)
				m[1] |= 1 << bit
				mustReject(t, name+"/v2flag", m)
			}
		}
		// An empty address list (UCP_NULL_RESOURCE), with nothing after.
		first := firstDeviceOffset(t, real)
		mustReject(t, name+"/null-resource", append(append([]byte(nil), real[:first]...), 0xff))
		// The first device marked EMPTY.
		m := append([]byte(nil), real...)
		m[first] |= addrMDEmptyDev
		mustReject(t, name+"/empty-dev", m)
	}
}

// firstDeviceOffset returns where the device list of a captured address starts.
func firstDeviceOffset(t *testing.T, a []byte) int {
	off := 1
	flags := a[0] >> 4
	if a[0]&0x0f == addrVersionV2 {
		off, flags = 2, a[1]
	}
	if a[0]&0x0f == addrVersionV1 || flags&addrHdrWorkerUUID != 0 {
		off += 8
	}
	if flags&addrHdrClientID != 0 {
		off += 8
	}
	if flags&addrHdrDebugInfo != 0 {
		off += 1 + int(a[off])
	}
	return off
}

// TestValidateAddressHandBuilt checks each field rule on small addresses
// built by hand in the v1 layout.
func TestValidateAddressHandBuilt(t *testing.T) {
	attr := []byte{0, 0, 0, 0, 0, 0, 0x80, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0} // bandwidth 1.0
	build := func(md, dev byte, devAddr []byte, ifLen byte, ifAddr []byte) []byte {
		a := []byte{0x20, 1, 2, 3, 4, 5, 6, 7, 8, md, dev}
		a = append(a, devAddr...)
		a = append(a, 0xcf, 0x19)
		a = append(a, attr...)
		a = append(a, ifLen)
		return append(a, ifAddr...)
	}
	ok := build(0x20, 0x82, []byte{1, 2}, 0x82, []byte{9, 9})
	if err := ValidateAddress(ok); err != nil {
		t.Fatalf("hand-built address rejected: %v", err)
	}
	mustReject(t, "dev len past end", build(0x20, 0x9f, []byte{1, 2}, 0x82, []byte{9, 9}))
	mustReject(t, "iface len past end", build(0x20, 0x82, []byte{1, 2}, 0xbf, []byte{9, 9}))
	mustReject(t, "ep address in worker address", build(0x20, 0x82, []byte{1, 2}, 0xc2, []byte{9, 9}))
	mustReject(t, "no LAST device", build(0x20, 0x02, []byte{1, 2}, 0x82, []byte{9, 9}))
	mustReject(t, "no LAST iface", build(0x20, 0x82, []byte{1, 2}, 0x02, []byte{9, 9}))
	// dev byte 0xc2: LAST | NUM_PATHS, length 2; the path count comes first.
	paths := func(n byte) []byte {
		a := append([]byte(nil), ok[:11]...)
		a[10] = 0xc2
		a = append(a, n)
		return append(a, ok[11:]...)
	}
	if err := ValidateAddress(paths(2)); err != nil {
		t.Fatalf("two paths rejected: %v", err)
	}
	mustReject(t, "one path", paths(1))
	mustReject(t, "sysdev unknown", func() []byte {
		a := append([]byte(nil), ok[:11]...)
		a[10] = 0xa2 // LAST | SYS_DEVICE
		a = append(a, 0xff)
		return append(a, ok[11:]...)
	}())
	// v2: md index extended past the 64 MDs UCX can keep; non-canonical
	// extensions.
	v2 := func(md ...byte) []byte {
		a := []byte{0x01, 0x02, 1, 2, 3, 4, 5, 6, 7, 8}
		a = append(a, md...)
		a = append(a, 0x82, 1, 2, 0xcf, 0x19, 0x0c, 0x01, 0x5a, 0x01, 0x80, 0x00, 0x8b, 0x00, 0x82, 9, 9)
		return a
	}
	if err := ValidateAddress(v2(0x05)); err != nil {
		t.Fatalf("v2 hand-built address rejected: %v", err)
	}
	mustReject(t, "v2 md index 200", v2(0x7f, 200))
	mustReject(t, "v2 md extension below mask", v2(0x7f, 3))
	nan := append([]byte(nil), ok...)
	copy(nan[13+2+4:], []byte{0, 0, 0xc0, 0x7f}) // bandwidth NaN
	mustReject(t, "NaN bandwidth", nan)
	zero := append([]byte(nil), ok...)
	copy(zero[13+2+4:], []byte{0, 0, 0, 0})
	mustReject(t, "zero bandwidth", zero)
	// Many interfaces on one device: more than UCX's resource limit.
	many := append([]byte(nil), ok[:13]...)
	for i := 0; i < addrMaxResources+1; i++ {
		many = append(many, 0xcf, 0x19)
		many = append(many, attr...)
		many = append(many, 0x00)
	}
	many[len(many)-1] = 0x80
	mustReject(t, "too many interfaces", many)
}

// FuzzValidateAddress: ValidateAddress never panics, and what it accepts
// is a whole address (no byte of it can be dropped from the end).
func FuzzValidateAddress(f *testing.F) {
	for _, a := range realAddresses(f) {
		f.Add(a)
	}
	f.Add([]byte{0xff})
	f.Fuzz(func(t *testing.T, a []byte) {
		err := ValidateAddress(a)
		if err != nil {
			if !errors.Is(err, ErrBadAddress) {
				t.Fatalf("error does not wrap ErrBadAddress: %v", err)
			}
			return
		}
		if len(a) > 0 && ValidateAddress(a[:len(a)-1]) == nil {
			t.Fatalf("both %x and its prefix are accepted", a)
		}
	})
}

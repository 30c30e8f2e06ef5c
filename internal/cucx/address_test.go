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
// workers of each UCX release into testdata/addr/RELEASE (tcp, sm, all
// transports; address v1 and v2; debug info), keyed "RELEASE/NAME".
// Capture them with CUCX_UPDATE_TESTDATA=1 go test -run
// TestRealAddressesValidate, built against each release (make
// golden-addresses UCX_VERSION=...).
func realAddresses(t testing.TB) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "addr", "*", "*.hex"))
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
		out[filepath.Base(filepath.Dir(f))+"/"+strings.TrimSuffix(filepath.Base(f), ".hex")] = a
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

// TestValidateAddressReleaseLayouts: the layouts UCX 1.16 and later pack
// (openucx/ucx PR #9273): v1 addresses end with an empty pseudo-device
// whose md byte carries the release version, v2 addresses carry it in the
// header's high nibble; and UCX 1.19 dropped the legacy MD flags from v1
// md bytes.
func TestValidateAddressReleaseLayouts(t *testing.T) {
	attr := []byte{0, 0, 0, 0, 0, 0, 0x80, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0} // bandwidth 1.0
	// v1: header, uuid, one device (md byte, dev byte, 2-byte address),
	// one iface (LAST, 2-byte address), then what tail appends.
	v1 := func(md, dev byte, tail ...byte) []byte {
		a := []byte{0x20, 1, 2, 3, 4, 5, 6, 7, 8, md, dev, 1, 2, 0xcf, 0x19}
		a = append(a, attr...)
		a = append(a, 0x82, 9, 9)
		return append(a, tail...)
	}
	for _, c := range []struct {
		nibble byte
		want   string
	}{{0x0, "1.16"}, {0x2, "1.18"}, {0x6, "1.22"}} {
		a := v1(0x00, 0x02, addrMDEmptyDev|c.nibble, addrFlagLast)
		if err := ValidateAddress(a); err != nil {
			t.Errorf("v1 address with the %s release device rejected: %v", c.want, err)
		}
		if got := AddressRelease(a); got != c.want {
			t.Errorf("AddressRelease = %q, want %q", got, c.want)
		}
	}
	if got := AddressRelease(v1(0x00, 0x82)); got != "" {
		t.Errorf("AddressRelease of a 1.13 address = %q, want none", got)
	}
	mustReject(t, "release device after a LAST device", v1(0x00, 0x82, 0x82, 0x80))
	mustReject(t, "release device with an address", v1(0x00, 0x02, 0x82, 0x81, 7))
	mustReject(t, "release device with paths", v1(0x00, 0x02, 0x82, 0xc0, 2))
	mustReject(t, "release device not last", v1(0x00, 0x02, 0x82, 0x00))
	mustReject(t, "release device, then garbage", v1(0x00, 0x02, 0x82, 0x80, 0))
	mustReject(t, "release device truncated", v1(0x00, 0x02, 0x82))
	mustReject(t, "only a release device", []byte{0x20, 1, 2, 3, 4, 5, 6, 7, 8, 0x82, 0x80})

	// Reserved bits in the release device: a layout from after 1.22.
	err := ValidateAddress(v1(0x00, 0x02, 0x80|0x10|0x7, addrFlagLast))
	if err == nil || !strings.Contains(err.Error(), "UCX 1.23") {
		t.Errorf("reserved release bits: %v, want an error naming UCX 1.23", err)
	}
	// Legacy MD flags: fine up to 1.18, an index >= 64 from 1.19 on.
	if err := ValidateAddress(v1(0x60, 0x02, 0x82, 0x80)); err != nil {
		t.Errorf("1.18 address with legacy MD flags rejected: %v", err)
	}
	mustReject(t, "1.19 md index 64", v1(0x40, 0x02, 0x83, 0x80))
	if err := ValidateAddress(v1(0x20, 0x02, 0x83, 0x80)); err != nil {
		t.Errorf("1.19 address with md index 32 rejected: %v", err)
	}

	// v2: the release in the header's high nibble.
	v2 := func(h byte, md ...byte) []byte {
		a := []byte{h, 0x02, 1, 2, 3, 4, 5, 6, 7, 8}
		a = append(a, md...)
		return append(a, 0x82, 1, 2, 0xcf, 0x19, 0x0c, 0x01, 0x5a, 0x01, 0x80, 0x00, 0x8b, 0x00, 0x82, 9, 9)
	}
	for nibble, want := range map[byte]string{0x0: "", 0x2: "1.18", 0x6: "1.22", 0xd: "1.13"} {
		a := v2(nibble<<4|addrVersionV2, 0x05)
		if err := ValidateAddress(a); err != nil {
			t.Errorf("v2 address with release nibble %d rejected: %v", nibble, err)
		}
		if got := AddressRelease(a); got != want {
			t.Errorf("v2 nibble %d: AddressRelease = %q, want %q", nibble, got, want)
		}
	}
	withRelease := v2(0x21, 0x05)
	withRelease[11] = 0x02 // the real device is no longer the last
	mustReject(t, "v2 with a release device", append(withRelease, 0x82, 0x80))
	if err := ValidateAddress(withRelease); err == nil {
		t.Errorf("v2 without a LAST device accepted")
	}
	err = ValidateAddress(append(v2(0x71, 0x05), 0))
	if err == nil || !strings.Contains(err.Error(), "UCX 1.23") {
		t.Errorf("trailing bytes in a 1.23 v2 address: %v, want an error naming UCX 1.23", err)
	}
	err = ValidateAddress([]byte{0x02, 0})
	if err == nil || !strings.Contains(err.Error(), KnownReleases) {
		t.Errorf("address version 2: %v, want an error naming %s", err, KnownReleases)
	}
}

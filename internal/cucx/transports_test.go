package cucx

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// TestRealAddressesPassTransportCheck: every address a real UCX packed
// passes, and each of its interfaces is a known transport.
func TestRealAddressesPassTransportCheck(t *testing.T) {
	for f, a := range realAddresses(t) {
		es, err := AddressTransports(a)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(es) == 0 {
			t.Errorf("%s: no interfaces", f)
		}
		var names []string
		for _, e := range es {
			names = append(names, e.Name+"/"+itoa(e.DevLen)+"/"+itoa(e.IfaceLen))
		}
		t.Logf("%s: %s", f, strings.Join(names, " "))
		if err := CheckTransports(a); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// relabel returns a copy of addr in which every interface with checksum
// from carries checksum to instead.
func relabel(t *testing.T, addr []byte, from, to uint16) []byte {
	t.Helper()
	out := append([]byte(nil), addr...)
	n := 0
	for i := 0; i+1 < len(out); i++ {
		if uint16(out[i])|uint16(out[i+1])<<8 == from {
			// Only at an interface entry: check by re-walking.
			cp := append([]byte(nil), out...)
			cp[i], cp[i+1] = byte(to), byte(to>>8)
			es, err := AddressTransports(cp)
			if err != nil {
				continue
			}
			for _, e := range es {
				if e.Csum == to && e.DevLen == 0 {
					out = cp
					n++
				}
			}
		}
	}
	if n == 0 {
		t.Fatalf("no interface with checksum %#04x", from)
	}
	return out
}

// TestForgedTransportRejected performs the forged-transport attack on the
// address level: the self interface relabelled as tcp or posix passes
// ValidateAddress but not CheckTransports; so does an unknown checksum.
func TestForgedTransportRejected(t *testing.T) {
	self, tcp, posix := crc16String("self"), crc16String("tcp"), crc16String("posix")
	for f, a := range realAddresses(t) {
		es, err := AddressTransports(a)
		if err != nil {
			t.Fatal(err)
		}
		hasSelf := false
		for _, e := range es {
			hasSelf = hasSelf || e.Name == "self"
		}
		if !hasSelf {
			continue
		}
		for _, to := range []uint16{tcp, posix, 0x1234} {
			forged := relabel(t, a, self, to)
			if err := ValidateAddress(forged); err != nil {
				t.Logf("%s: ValidateAddress already rejects it: %v", f, err)
			}
			if err := CheckTransports(forged); !errors.Is(err, ErrBadTransport) {
				t.Errorf("%s relabelled self→%#04x: CheckTransports = %v, want ErrBadTransport", f, to, err)
			}
		}
	}
}

// TestTransportCheckNeverPanics: truncations of real addresses walk
// without a panic (errors are fine).
func TestTransportCheckNeverPanics(t *testing.T) {
	for _, a := range realAddresses(t) {
		for n := 0; n < len(a); n++ {
			_ = CheckTransports(a[:n])
		}
	}
}

package session

import (
	"net"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Network is the network name of ucxnet addresses.
const Network = "ucx"

// Addr is a ucxnet address, a registry name and for a conn's end the
// conn's id at that end. Its fields mean what ucxnet.Addr's do: ucxnet
// converts one to the other, so the two have the same fields in the same
// order.
type Addr struct {
	Name string
	ID   uint64
}

// Network returns "ucx".
func (a Addr) Network() string { return Network }

// String returns the name, or "name:id" for a conn's end.
func (a Addr) String() string {
	if a.ID == 0 {
		return a.Name
	}
	return net.JoinHostPort(a.Name, formatID(a.ID))
}

// displayName is a name a peer claims for its end, fit for RemoteAddr and
// logs: every rune not printable (control characters, the escape of a
// terminal sequence, bidirectional and other format characters, bytes
// that are not UTF-8) is replaced by '_'.
func displayName(s string) string {
	printable := func(r rune) bool { return r != utf8.RuneError && unicode.IsPrint(r) }
	if strings.IndexFunc(s, func(r rune) bool { return !printable(r) }) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if !printable(r) {
			return '_'
		}
		return r
	}, s)
}

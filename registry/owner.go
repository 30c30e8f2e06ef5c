package registry

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"
)

// ErrForeignRegistry reports a registry server on a loopback address
// whose socket belongs to another user: the [HTTP] backend does not send
// it this user's default token (see [Open]).
var ErrForeignRegistry = errors.New("registry: the loopback registry server belongs to another user")

// dialFunc is the type of http.Transport.DialContext.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// ownerCheckedDial wraps dial for a registry on this host that is to get
// the default token: after connecting, it finds the server's end of the
// connection among this host's sockets and closes the connection, with an
// error wrapping ErrForeignRegistry, unless that socket belongs to this
// user (or to root, who can read the token file anyway). Nothing has been
// sent on the connection by then. tokenFile names the token in errors.
func ownerCheckedDial(dial dialFunc, tokenFile string) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if err := checkServerOwner(c, tokenFile); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
}

// checkServerOwner is ownerCheckedDial's check of one connection.
func checkServerOwner(c net.Conn, tokenFile string) error {
	local, lok := c.LocalAddr().(*net.TCPAddr)
	remote, rok := c.RemoteAddr().(*net.TCPAddr)
	if !lok || !rok {
		return fmt.Errorf("%w: not sending the default token (%s) over a %T connection", ErrForeignRegistry, tokenFile, c)
	}
	if !remote.IP.IsLoopback() {
		return fmt.Errorf("%w: not sending the default token (%s) to %s: the name resolved to an address not on this host; set %s or %s to trust a remote registry", ErrForeignRegistry, tokenFile, remote, EnvRegistryToken, EnvRegistryTokenFile)
	}
	me := os.Geteuid()
	var uid int
	var err error
	// The server's end exists once connect returns (as a request socket
	// until the server's kernel takes the ACK, with its listener's owner);
	// a few tries cover a table being rewritten under us.
	for try := 0; try < 20; try++ {
		if uid, err = socketOwner(remote.AddrPort(), local.AddrPort()); err == nil || !errors.Is(err, errSocketNotFound) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("%w: not sending the default token (%s) to %s: cannot tell who runs that server: %v; set %s or %s to trust it deliberately", ErrForeignRegistry, tokenFile, remote, err, EnvRegistryToken, EnvRegistryTokenFile)
	}
	if uid != me && uid != 0 {
		return fmt.Errorf("%w: not sending the default token (%s) to %s: the server's socket belongs to uid %d, not to this user (uid %d); another user may have taken the port before your registry; stop that server or use another port, or set %s or %s to trust it deliberately", ErrForeignRegistry, tokenFile, remote, uid, me, EnvRegistryToken, EnvRegistryTokenFile)
	}
	return nil
}

// errSocketNotFound reports that no socket has the asked-for addresses.
var errSocketNotFound = errors.New("no such socket in /proc/net/tcp or tcp6")

// procNetTCPOwner finds, in the contents of /proc/net/tcp (v6 false) or
// /proc/net/tcp6, the socket whose local address is local and remote
// address remote, and returns its uid. IPv4-mapped IPv6 addresses match
// their IPv4 form.
func procNetTCPOwner(data []byte, v6 bool, local, remote netip.AddrPort) (int, bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Scan() // header
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		// sl local rem st tx:rx tr:when retrnsmt uid ...
		if len(f) < 8 {
			continue
		}
		l, lok := parseProcAddr(string(f[1]), v6)
		r, rok := parseProcAddr(string(f[2]), v6)
		if !lok || !rok || !sameAddrPort(l, local) || !sameAddrPort(r, remote) {
			continue
		}
		uid, err := strconv.ParseUint(string(f[7]), 10, 32)
		if err != nil {
			continue
		}
		return int(uid), true
	}
	return 0, false
}

func sameAddrPort(a, b netip.AddrPort) bool {
	return a.Port() == b.Port() && a.Addr().Unmap() == b.Addr().Unmap()
}

// parseProcAddr parses "0100007F:1F90" (tcp) or 32 hex digits and a port
// (tcp6): the address as the kernel's native-endian 32-bit words, the
// port as a number.
func parseProcAddr(s string, v6 bool) (netip.AddrPort, bool) {
	hexAddr, hexPort, ok := bytes.Cut([]byte(s), []byte(":"))
	want := 8
	if v6 {
		want = 32
	}
	if !ok || len(hexAddr) != want {
		return netip.AddrPort{}, false
	}
	raw := make([]byte, want/2)
	if _, err := hex.Decode(raw, hexAddr); err != nil {
		return netip.AddrPort{}, false
	}
	ip := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(ip[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	port, err := strconv.ParseUint(string(hexPort), 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	addr, _ := netip.AddrFromSlice(ip)
	return netip.AddrPortFrom(addr, uint16(port)), true
}

package registry

import (
	"fmt"
	"net/netip"
	"os"
)

// socketOwner returns the uid owning the TCP socket of this network
// namespace whose local address is local and remote address remote, as
// /proc/net/tcp and /proc/net/tcp6 list it. An error wraps
// errSocketNotFound when no socket matches.
func socketOwner(local, remote netip.AddrPort) (int, error) {
	for _, f := range []struct {
		path string
		v6   bool
	}{{"/proc/net/tcp", false}, {"/proc/net/tcp6", true}} {
		data, err := os.ReadFile(f.path)
		if err != nil {
			if os.IsNotExist(err) && f.v6 {
				continue // no IPv6 here
			}
			return 0, err
		}
		if uid, ok := procNetTCPOwner(data, f.v6, local, remote); ok {
			return uid, nil
		}
	}
	return 0, fmt.Errorf("%w (local %s, remote %s)", errSocketNotFound, local, remote)
}

//go:build !linux

package lane

import (
	"net"
	"time"
)

// Info knows nothing off Linux: no round trip, not closed (the
// kernel's error alone counts).
func Info(*net.TCPConn) (time.Duration, bool) { return 0, false }

// Established does nothing off Linux: Bytes does not know.
func (c *Conn) Established() {}

// Bytes knows nothing off Linux: the conn's own counts stand.
func (c *Conn) Bytes() (in, out uint64, ok bool) { return 0, 0, false }

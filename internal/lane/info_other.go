//go:build !linux

package lane

import (
	"net"
	"syscall"
	"time"
)

// Info knows nothing off Linux: no round trip, not closed (the
// kernel's error alone counts).
func Info(*net.TCPConn) (time.Duration, bool) { return 0, false }

// Unread knows nothing off Linux: 0.
func Unread(*net.TCPConn) int { return 0 }

// deferAccept does nothing off Linux: a silent conn takes a preamble place
// until evicted or cut.
func deferAccept(_, _ string, _ syscall.RawConn) error { return nil }

// HelloCame knows nothing off Linux: false.
func HelloCame(*net.TCPConn) bool { return false }

// Established does nothing off Linux: Bytes does not know.
func (c *Conn) Established() {}

// Bytes knows nothing off Linux: the conn's own counts stand.
func (c *Conn) Bytes() (in, out uint64, ok bool) { return 0, 0, false }

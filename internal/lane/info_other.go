//go:build !linux

package lane

import (
	"net"
	"time"
)

// Info knows nothing off Linux: no round trip, not closed (the
// kernel's error alone counts).
func Info(*net.TCPConn) (time.Duration, bool) { return 0, false }

// Unread knows nothing off Linux: 0.
func Unread(*net.TCPConn) int { return 0 }

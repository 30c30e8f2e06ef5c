//go:build !linux

package ucxnet

import (
	"net"
	"time"
)

// tcpClosed reports false off Linux (the kernel's error alone counts).
func tcpClosed(*net.TCPConn) bool { return false }

// tcpInfo knows nothing off Linux: no round trip, not closed.
func tcpInfo(*net.TCPConn) (time.Duration, bool) { return 0, false }

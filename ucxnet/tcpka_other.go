//go:build !linux

package ucxnet

import (
	"net"
	"time"
)

// setUserTimeout does nothing off Linux (keepalive alone applies).
func setUserTimeout(*net.TCPConn, time.Duration) {}

// tcpClosed reports false off Linux (the kernel's error alone counts).
func tcpClosed(*net.TCPConn) bool { return false }

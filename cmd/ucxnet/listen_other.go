//go:build !linux

package main

import "errors"

// listeningTCP is only implemented on Linux (from /proc).
func listeningTCP() ([]string, error) {
	return nil, errors.New("unknown: listing this process's sockets needs Linux /proc")
}

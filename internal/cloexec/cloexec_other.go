//go:build !linux

package cloexec

// supported reports whether this platform sweeps.
const supported = false

// markCloexec does nothing off Linux.
func markCloexec([]byte) int { return 0 }

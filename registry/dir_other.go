//go:build !linux

package registry

import "errors"

// procStartTime is unsupported outside Linux: StartTime is not checked
// there, only whether the pid exists.
func procStartTime(pid int) (uint64, error) {
	return 0, errors.ErrUnsupported
}

// procMounted reports false: there is no /proc to consult.
func procMounted() bool { return false }

// procZombie reports false: without /proc, exited-but-unreaped processes
// cannot be told apart.
func procZombie(pid int) bool { return false }

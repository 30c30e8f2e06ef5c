//go:build unix

package ucxnet

import (
	"sync"
	"syscall"
)

// readinessFD calls f once with one end of a non-blocking Unix socket
// pair (a socket, so that recv with MSG_PEEK works on it, as go-redis's
// check does) that holds one byte if data, is at EOF if ended, and is
// empty otherwise. The empty one, the common answer, is one pair for the
// process that nothing ever writes to; the others are made for the call.
func readinessFD(data, ended bool, f func(fd uintptr) bool) error {
	if !data && !ended {
		p, err := idlePair()
		if err != nil {
			return err
		}
		f(uintptr(p[0]))
		return nil
	}
	p, err := socketPair()
	if err != nil {
		return err
	}
	defer syscall.Close(p[0])
	if data {
		_, err = syscall.Write(p[1], []byte{0})
	}
	syscall.Close(p[1])
	if err != nil {
		return err
	}
	f(uintptr(p[0]))
	return nil
}

// idlePair is the process's socket pair that stays empty.
var idlePair = sync.OnceValues(socketPair)

// socketPair returns a Unix stream socket pair, close-on-exec, its first
// end non-blocking.
func socketPair() ([2]int, error) {
	syscall.ForkLock.RLock() // no child inherits the pair between Socketpair and CloseOnExec
	p, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(p[0])
		syscall.CloseOnExec(p[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return p, err
	}
	if err := syscall.SetNonblock(p[0], true); err != nil {
		syscall.Close(p[0])
		syscall.Close(p[1])
		return p, err
	}
	return p, nil
}

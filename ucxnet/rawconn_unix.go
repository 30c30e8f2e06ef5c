//go:build unix

package ucxnet

import "syscall"

// readinessFD calls f once with the read end of a fresh non-blocking pipe
// holding one byte if data, at EOF if ended, empty otherwise.
func readinessFD(data, ended bool, f func(fd uintptr) bool) error {
	var p [2]int
	syscall.ForkLock.RLock() // no child inherits the pipe between Pipe and CloseOnExec
	err := syscall.Pipe(p[:])
	if err == nil {
		syscall.CloseOnExec(p[0])
		syscall.CloseOnExec(p[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return err
	}
	defer syscall.Close(p[0])
	if err := syscall.SetNonblock(p[0], true); err != nil {
		syscall.Close(p[1])
		return err
	}
	if data {
		_, err = syscall.Write(p[1], []byte{0})
	}
	if data || ended {
		syscall.Close(p[1])
	} else {
		defer syscall.Close(p[1])
	}
	if err != nil {
		return err
	}
	f(uintptr(p[0]))
	return nil
}

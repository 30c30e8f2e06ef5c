package progress

import (
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// efdWait is the engine goroutine's sleep on the worker's event fd, in Go's
// netpoller: the goroutine parks like one blocked in a socket Read, and the
// runtime's own netpoll wake runs it (and then the readers it readies) on
// the P that woke, instead of a blocking poll(2) on a thread of its own that
// the OS must wake and that must then find a P.
//
// The fd is a dup of UCX's (an epoll fd, which Go can register with its own
// epoll): closing the os.File closes only the dup. Setting O_NONBLOCK, which
// the two share, changes nothing for UCX: it only ever waits on it with
// epoll_wait.
type efdWait struct {
	f  *os.File
	rc syscall.RawConn
}

// newEFDWait registers a dup of the event fd efd with the netpoller.
func newEFDWait(efd int) (*efdWait, error) {
	fd, err := unix.FcntlInt(uintptr(efd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, &os.SyscallError{Syscall: "fcntl", Err: err}
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, &os.SyscallError{Syscall: "fcntl", Err: err}
	}
	f := os.NewFile(uintptr(fd), "ucx-worker-efd")
	// A file the netpoller did not take (it could not register it) has no
	// deadlines: that is how os tells.
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		f.Close()
		return nil, err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &efdWait{f: f, rc: rc}, nil
}

// wait arms the worker with arm, once the netpoller is set to catch the
// event fd's next readiness, and then sleeps until the fd is readable or
// the timeout arm returned passes (zero: arming found work, do not sleep).
// slept reports a sleep, ready a wake by the fd rather than the timeout.
// An error means the netpoller failed the fd; the caller must not use w
// again.
//
// Arming inside the RawConn callback is what makes this race-free: Read
// clears the pollDesc's readiness before calling it, so a wake-up that
// came before arming would be lost if the worker were armed earlier.
func (w *efdWait) wait(arm func() time.Duration) (slept, ready bool, err error) {
	// The last sleep's deadline may have expired: Read would fail at once.
	if err := w.f.SetReadDeadline(time.Time{}); err != nil {
		return false, false, err
	}
	first := true
	err = w.rc.Read(func(uintptr) bool {
		if !first {
			return true // the netpoller reported the fd readable
		}
		first = false
		d := arm()
		if d <= 0 {
			return true
		}
		slept = true
		if err := w.f.SetReadDeadline(time.Now().Add(d)); err != nil {
			return true
		}
		return false
	})
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return slept, false, nil
	case err != nil:
		return slept, false, err
	}
	return slept, slept, nil
}

// close unregisters and closes the dup (not UCX's fd).
func (w *efdWait) close() error { return w.f.Close() }

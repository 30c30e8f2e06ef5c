package session

import (
	"errors"
	"fmt"
	"syscall"
)

// Errors a stream, listener or dial can report, bare (ucxnet's face wraps
// them in a *net.OpError). Test for them with errors.Is, as with the
// standard library's conns: errors.Is(err, syscall.ECONNREFUSED) and so
// on.
var (
	// ErrRefused means the dialed name has no live listener, or the listener
	// refused the connection. It matches syscall.ECONNREFUSED.
	ErrRefused = &errnoError{"connection refused", syscall.ECONNREFUSED}
	// ErrReset means the peer aborted the conn, its process died, or the
	// link to it failed. It matches syscall.ECONNRESET.
	ErrReset = &errnoError{"connection reset by peer", syscall.ECONNRESET}
	// ErrWriteAfterShutdown means Write was called after CloseWrite. It
	// matches syscall.EPIPE.
	ErrWriteAfterShutdown = &errnoError{"write after CloseWrite", syscall.EPIPE}
	// ErrProtocol means the peer broke the frame protocol; the conn was
	// reset. It matches syscall.ECONNRESET.
	ErrProtocol = &errnoError{"protocol violation by peer; connection reset", syscall.ECONNRESET}
	// ErrTransportClosed means the conn's Transport was closed.
	ErrTransportClosed = errors.New("ucxnet: transport closed")
	// errNoTransport: a Dialer or ListenConfig without a Transport (the
	// face fills in its default one).
	errNoTransport = errors.New("ucxnet: no transport")
)

// errnoError is an error with its own text that matches an errno.
type errnoError struct {
	msg   string
	errno syscall.Errno
}

// Error returns the error's text.
func (e *errnoError) Error() string { return e.msg }

// Is reports whether target is this error or its errno.
func (e *errnoError) Is(target error) bool { return target == e.errno }

// Timeout reports false: these are not timeouts.
func (e *errnoError) Timeout() bool { return false }

// Temporary reports false.
func (e *errnoError) Temporary() bool { return false }

// detailError adds detail to one of the errors above while keeping errors.Is.
type detailError struct {
	base   error
	detail string
}

// Error returns the base error's text and the detail.
func (e *detailError) Error() string { return fmt.Sprintf("%v: %s", e.base, e.detail) }

// Unwrap returns the base error, so errors.Is sees through the detail.
func (e *detailError) Unwrap() error { return e.base }

func withDetail(base error, format string, args ...any) error {
	return &detailError{base: base, detail: fmt.Sprintf(format, args...)}
}

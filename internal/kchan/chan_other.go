//go:build !linux

package kchan

import (
	"context"
	"errors"
)

// ErrUnsupported means the platform has no kernel channel (not Linux).
var ErrUnsupported = errors.New("kchan: unsupported on this platform")

// Cred is a channel peer's identity as the kernel saw it.
type Cred struct {
	PID      int32
	UID, GID uint32
}

// Chan is one end of an established channel; none exist off Linux.
type Chan struct {
	Cred  Cred
	Hello Hello
}

// End says how a channel ended.
type End int

// The ends.
const (
	Died End = iota
	Closed
	Local
)

// Watch returns Local: there is no channel to watch.
func (ch *Chan) Watch() End { return Local }

// Close does nothing.
func (ch *Chan) Close(announce bool) {}

// Dial fails with ErrUnsupported.
func Dial(ctx context.Context, name string, self Hello) (*Chan, error) { return nil, ErrUnsupported }

// Server is no server off Linux.
type Server struct{}

// Listen fails with ErrUnsupported.
func Listen(names []string, self Hello, admit func(*Chan) bool, ended func(*Chan, End)) (*Server, []string, error) {
	return nil, nil, ErrUnsupported
}

// Close does nothing.
func (s *Server) Close() {}

// IPCNamespace is 0 off Linux.
func IPCNamespace() uint64 { return 0 }

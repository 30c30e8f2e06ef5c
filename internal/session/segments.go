package session

import (
	"github.com/ucxnet/ucxnet/internal/stream"
	"github.com/ucxnet/ucxnet/internal/ucxconf"
)

// PathKind is the family of UCX transports carrying an endpoint, as far
// as frame sizes go: a write is cut into frames that fit one receive
// segment of the UCX transport carrying it (internal/ucxconf sizes the
// segments and says why).
type PathKind int

// The path kinds.
const (
	PathOther        PathKind = iota // RDMA, mixed, or not known yet
	PathSharedMemory                 // posix, sysv (with cma, self)
	PathTCP                          // tcp (with self)
)

// SegLimits are the largest frame payloads a peer receives as one UCX
// message over shared memory and over TCP, from its Hello.
type SegLimits struct {
	Shm, TCP int
}

// PeerSegLimits reads a peer's segment limits from its Hello. A peer that
// does not say (an older ucxnet) has UCX's default segments.
func PeerSegLimits(h stream.Hello) SegLimits {
	l := SegLimits{Shm: ucxconf.Shm.DefaultFrame(), TCP: ucxconf.TCP.DefaultFrame()}
	if h.ShmFrame > 0 {
		l.Shm = int(h.ShmFrame)
	}
	if h.TCPFrame > 0 {
		l.TCP = int(h.TCPFrame)
	}
	return l
}

// Limit returns the largest frame the peer takes over a path: sending a
// larger one would make UCX fragment it by this side's segment size, which
// the peer's smaller segments cannot hold (UCX 1.13 then aborts the
// peer's process). No limit for paths whose segments ucxnet leaves alone.
func (l SegLimits) Limit(k PathKind) int {
	switch k {
	case PathSharedMemory:
		return l.Shm
	case PathTCP:
		return l.TCP
	}
	return stream.MaxPayload
}

package ucxnet

import (
	"github.com/ucxnet/ucxnet/internal/stream"
	"github.com/ucxnet/ucxnet/internal/ucxconf"
)

// Frame sizes: a write is cut into frames that fit one receive segment of
// the UCX transport carrying it (internal/ucxconf sizes the segments and
// says why).

// pathKind is the family of UCX transports carrying an endpoint, as far
// as frame sizes go.
type pathKind int

const (
	pathOther        pathKind = iota // RDMA, mixed, or not known yet
	pathSharedMemory                 // posix, sysv (with cma, self)
	pathTCP                          // tcp (with self)
)

// segLimits are the largest frame payloads a peer receives as one UCX
// message, from its Hello. A peer that does not say (an older ucxnet)
// has UCX's default segments.
type segLimits struct {
	shm, tcp int
}

// peerSegLimits reads a peer's segment limits from its Hello.
func peerSegLimits(h stream.Hello) segLimits {
	l := segLimits{shm: ucxconf.Shm.DefaultFrame(), tcp: ucxconf.TCP.DefaultFrame()}
	if h.ShmFrame > 0 {
		l.shm = int(h.ShmFrame)
	}
	if h.TCPFrame > 0 {
		l.tcp = int(h.TCPFrame)
	}
	return l
}

// limit returns the largest frame the peer takes over a path: sending a
// larger one would make UCX fragment it by this side's segment size, which
// the peer's smaller segments cannot hold (UCX 1.13 then aborts the
// peer's process). No limit for paths whose segments ucxnet leaves alone.
func (l segLimits) limit(k pathKind) int {
	switch k {
	case pathSharedMemory:
		return l.shm
	case pathTCP:
		return l.tcp
	}
	return stream.MaxPayload
}

// networkFrame is the frame size over RDMA and anything else whose segments
// ucxnet does not size: large enough to amortise per-frame costs, within
// 64 KiB.
const networkFrame = 64<<10 - 1024

package session

import (
	"slices"
	"strings"

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

// NetworkFrame is the frame size over RDMA and anything else whose
// segments ucxnet does not size: large enough to amortise per-frame costs,
// within 64 KiB.
const NetworkFrame = 64<<10 - 1024

// SendPath is how writes go out on an endpoint.
type SendPath struct {
	Kind     PathKind
	Frame    int  // payload bytes per frame
	ZeroCopy bool // large writes may be sent straight from the writer's memory
	// Known: UCX has said which transports carry the endpoint. Until
	// then the path may turn out to be shared memory or tcp, and frames
	// fit the smaller segments of the two.
	Known bool
}

// PeerLimit returns the largest frame the peer whose segments are l takes
// over sp: over a path not known yet, the smaller of its shared-memory and
// tcp limits.
func (sp SendPath) PeerLimit(l SegLimits) int {
	if !sp.Known {
		return min(l.Shm, l.TCP)
	}
	return l.Limit(sp.Kind)
}

// PathConfig is what this side's configuration says of send paths.
type PathConfig struct {
	ShmFrame   int  // the frame payload that fits one shared-memory segment
	TCPFrame   int  // the frame payload that fits one TCP receive segment
	FrameSize  int  // when positive, the payload of every frame
	CopyWrites bool // never send straight from the writer's memory
}

// ChoosePath returns how to send on an endpoint that the UCX transports tl
// ("posix/memory", "tcp/lo", ...) carry: frames that fit one receive
// segment of the transport (or of c.FrameSize; while tl is empty, the
// smaller of the shared-memory and tcp segments), and whether UCX may read
// large writes straight from the writer's pinned memory. Only over shared
// memory:
//   - over RDMA it would not be safe: UCX cannot see the Go runtime hand
//     pages back to the kernel, so a cached registration of Go memory
//     could go stale;
//   - over TCP it was faster (1 MiB writes 4.4 vs 3.0 GB/s here), but a
//     Write waiting on a stopped peer must end by force-closing the
//     endpoint with its sends in flight, and UCX 1.13's tcp transport then
//     crashes in ucp_worker_progress once the peer resumes (reproduced
//     6 times in 8). Copies cost throughput; crashes cost the process.
//
// The path is Known unless tl is empty (an endpoint still wiring up): the
// caller asks again next time.
func ChoosePath(tl []string, c PathConfig) SendPath {
	sp := SendPath{Frame: NetworkFrame}
	switch {
	case len(tl) == 0:
		sp.Frame = min(c.ShmFrame, c.TCPFrame, NetworkFrame)
	case onlyTransports(tl, "posix", "sysv", "cma", "self"):
		sp = SendPath{Kind: PathSharedMemory, Frame: c.ShmFrame, ZeroCopy: true}
	case onlyTransports(tl, "tcp", "self"):
		sp = SendPath{Kind: PathTCP, Frame: c.TCPFrame}
	}
	if c.FrameSize > 0 {
		sp.Frame = c.FrameSize
	}
	sp.ZeroCopy = sp.ZeroCopy && !c.CopyWrites
	sp.Known = len(tl) > 0
	return sp
}

// onlyTransports reports whether every transport ("tcp/lo",
// "posix/memory", ...) is one of names.
func onlyTransports(tl []string, names ...string) bool {
	for _, tr := range tl {
		name, _, _ := strings.Cut(tr, "/")
		if !slices.Contains(names, name) {
			return false
		}
	}
	return true
}

package ucxnet

import (
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/ucxnet/ucxnet/internal/stream"
)

// Frame sizes. A frame that fits one receive segment of the UCX transport
// carrying it costs one copy on each side: UCX copies it from the writer's
// buffer into the segment (or the socket), and Read copies it out. A frame
// one byte larger is cut into fragments that UCX reassembles in memory it
// mallocs per message, which was measured to cost far more than the
// fragmenting itself (page faults on every message). So ucxnet sizes the
// segments of the transports it knows (unless the user set them) and cuts
// writes into frames that fit them.

// A segment is a UCX transport's receive segment as ucxnet sizes it.
type segment struct {
	names   []string // UCX settings (without UCX_) that set it; ucxnet sets names[0]
	envName string   // the one of names that UCX reads from the environment
	size    int      // the size ucxnet asks for
	dflt    int      // UCX's own default
	max     int      // the largest UCX handles
	slack   int      // bytes of a segment that are UCX's and ucxnet's headers
}

var (
	// shmSegment is the shared-memory FIFO segment (posix and sysv
	// inherit MM_SEG_SIZE; UCX 1.13 ignores POSIX_/SYSV_SEG_SIZE given
	// through ucp_config_modify, measured): 32 KiB frames. A power of two
	// keeps common write sizes (64 KiB, 1 MiB) whole frames. Measured
	// against UCX's 8256-byte segments with 8000-byte frames: 64 KiB writes
	// 3.4 → 11 GB/s, 1 MiB writes 4.6 → 13 GB/s. Segments must stay below
	// 64 KiB: a FIFO element's length is 16 bits in UCX 1.13, and with a
	// 65792-byte segment a fragmented message trips an assertion in
	// ucp_am.c that aborts the process.
	shmSegment = segment{
		names:   []string{"MM_SEG_SIZE", "POSIX_SEG_SIZE", "SYSV_SEG_SIZE"},
		envName: "MM_SEG_SIZE",
		size:    32<<10 + 256, dflt: 8256, max: 1<<16 - 1, slack: 256,
	}
	// tcpSegment is UCX's TCP receive segment: 1 MiB frames, so a 1 MiB
	// write is one UCX message received with one recv. Measured against
	// the default 64 KiB (63 KiB frames): 1 MiB writes 2.8 → 3.5 GB/s.
	tcpSegment = segment{
		// Set as RX_SEG_SIZE: UCX 1.13 ignores TCP_RX_SEG_SIZE given
		// through ucp_config_modify (measured), though the environment
		// variable is UCX_TCP_RX_SEG_SIZE.
		names:   []string{"RX_SEG_SIZE", "TCP_RX_SEG_SIZE"},
		envName: "TCP_RX_SEG_SIZE",
		size:    1<<20 + 1024, dflt: 64 << 10, max: 1 << 30, slack: 1024,
	}
)

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
	l := segLimits{shm: shmSegment.dflt - shmSegment.slack, tcp: tcpSegment.dflt - tcpSegment.slack}
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

// modifyName returns the name under which ucp_config_modify sets s in the
// UCX release loaded: names[0], except for the tcp segment from UCX 1.18
// on. Up to 1.17 a setting passed to ucp_config_modify matches a
// component's setting by the name without its prefix (RX_SEG_SIZE), and
// the whole name (TCP_RX_SEG_SIZE) is ignored ("invalid configuration");
// 1.18 matches whole names only and ignores RX_SEG_SIZE, and from 1.21
// ucp_config_modify refuses it (UCS_ERR_INVALID_PARAM: the worker does not
// start). Measured with 1.13.1, 1.16.0, 1.18.1 and 1.22.0.
func (s *segment) modifyName() string {
	if s == &tcpSegment {
		if maj, min, ok := majorMinor(UCX().Version); ok && (maj > 1 || min >= 18) {
			return "TCP_RX_SEG_SIZE"
		}
	}
	return s.names[0]
}

// segmentNamed returns the segment a UCX setting sizes, or nil.
func segmentNamed(name string) *segment {
	for _, s := range []*segment{&shmSegment, &tcpSegment} {
		if slices.Contains(s.names, name) {
			return s
		}
	}
	return nil
}

// userValue returns the segment size the user set (in the environment or
// Config.UCX), or "".
func (s *segment) userValue(user map[string]string) string {
	for _, n := range s.names {
		if v, ok := user[n]; ok {
			return v
		}
		if v, ok := os.LookupEnv("UCX_" + n); ok {
			return v
		}
	}
	return ""
}

// frame returns the largest frame payload that fits one segment: of
// ucxnet's size, or of the one the user set (UCX's default if that cannot
// be parsed).
func (s *segment) frame(user map[string]string) int {
	seg := s.size
	if v := s.userValue(user); v != "" {
		if seg = parseMemUnits(v); seg < 2*s.slack {
			seg = s.dflt
		}
	}
	return min(seg, s.max) - s.slack
}

// parseMemUnits parses a UCX size such as "8256", "64k" or "1m"; 0 if it
// cannot.
func parseMemUnits(v string) int {
	v = strings.ToLower(strings.TrimSpace(v))
	mult := 1
	switch {
	case strings.HasSuffix(v, "kb"), strings.HasSuffix(v, "k"):
		mult, v = 1<<10, strings.TrimRight(v, "kb")
	case strings.HasSuffix(v, "mb"), strings.HasSuffix(v, "m"):
		mult, v = 1<<20, strings.TrimRight(v, "mb")
	case strings.HasSuffix(v, "b"):
		v = strings.TrimSuffix(v, "b")
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > 1<<30/mult {
		return 0
	}
	return n * mult
}

// sharedMemoryEnabled reports whether a UCX_TLS value may select one of
// the shared-memory transports that UCX's MM_ settings configure.
func sharedMemoryEnabled(tls string) bool {
	return tlsSelects(tls, []string{"posix", "sysv", "xpmem"})
}

// tcpEnabled reports whether a UCX_TLS value may select UCX's tcp transport.
func tcpEnabled(tls string) bool { return tlsSelects(tls, []string{"tcp"}) }

// tlsAliases are UCX 1.13's UCX_TLS group names (ucp_context.c) that
// matter here.
var tlsAliases = map[string][]string{
	"sm":  {"posix", "sysv", "xpmem", "knem", "cma"},
	"shm": {"posix", "sysv", "xpmem", "knem", "cma"},
	"mm":  {"posix", "sysv", "xpmem"},
}

// tlsSelects reports whether a UCX_TLS value leaves at least one of
// members selectable: an empty value or "all" selects everything; a list
// selects what it names (groups expanded); a "^" list selects everything
// it does not name.
func tlsSelects(tls string, members []string) bool {
	tls = strings.TrimSpace(tls)
	if tls == "" {
		return true
	}
	exclude := strings.HasPrefix(tls, "^")
	named := map[string]bool{}
	for _, f := range strings.Split(strings.TrimPrefix(tls, "^"), ",") {
		f = strings.TrimSpace(f)
		for _, m := range members {
			if f == m || f == "all" || slices.Contains(tlsAliases[f], m) {
				named[m] = true
			}
		}
	}
	if exclude {
		return len(named) < len(members)
	}
	return len(named) > 0
}

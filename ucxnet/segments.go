package ucxnet

import (
	"os"
	"slices"
	"strconv"
	"strings"
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
	names []string // UCX settings (without UCX_) that set it; ucxnet sets names[0]
	size  int      // the size ucxnet asks for
	dflt  int      // UCX's own default
	max   int      // the largest UCX handles
	slack int      // bytes of a segment that are UCX's and ucxnet's headers
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
		names: []string{"MM_SEG_SIZE", "POSIX_SEG_SIZE", "SYSV_SEG_SIZE"},
		size:  32<<10 + 256, dflt: 8256, max: 1<<16 - 1, slack: 256,
	}
	// tcpSegment is UCX's TCP receive segment: 1 MiB frames, so a 1 MiB
	// write is one UCX message received with one recv. Measured against
	// the default 64 KiB (63 KiB frames): 1 MiB writes 2.8 → 3.5 GB/s.
	tcpSegment = segment{
		// Set as RX_SEG_SIZE: UCX 1.13 ignores TCP_RX_SEG_SIZE given
		// through ucp_config_modify (measured), though the environment
		// variable is UCX_TCP_RX_SEG_SIZE.
		names: []string{"RX_SEG_SIZE", "TCP_RX_SEG_SIZE"},
		size:  1<<20 + 1024, dflt: 64 << 10, max: 1 << 30, slack: 1024,
	}
)

// networkFrame is the frame size over RDMA and anything else whose segments
// ucxnet does not size: large enough to amortise per-frame costs, within
// 64 KiB.
const networkFrame = 64<<10 - 1024

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

// sharedMemoryNames are the UCX_TLS names that select a shared-memory
// transport.
var sharedMemoryNames = []string{"sm", "shm", "mm", "posix", "sysv", "xpmem", "knem"}

// transportEnabled reports whether a UCX_TLS value may select a transport
// known by any of names.
func transportEnabled(tls string, names ...string) bool {
	tls = strings.TrimSpace(tls)
	if tls == "" {
		return true
	}
	exclude := strings.HasPrefix(tls, "^")
	for _, f := range strings.Split(strings.TrimPrefix(tls, "^"), ",") {
		f = strings.TrimSpace(f)
		if f == "all" && !exclude || slices.Contains(names, f) {
			return !exclude
		}
	}
	return exclude
}

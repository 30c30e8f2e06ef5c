package ucxconf

import (
	"os"
	"slices"
	"strconv"
	"strings"
)

// Segment is a UCX transport's receive segment as ucxnet sizes it.
//
// A frame that fits one receive segment of the UCX transport carrying it
// costs one copy on each side: UCX copies it from the writer's buffer into
// the segment (or the socket), and Read copies it out. A frame one byte
// larger is cut into fragments that UCX reassembles in memory it mallocs
// per message, which was measured to cost far more than the fragmenting
// itself (page faults on every message). So ucxnet sizes the segments of
// the transports it knows (unless the user set them) and cuts writes into
// frames that fit them.
type Segment struct {
	names   []string // UCX settings (without UCX_) that set it; ucxnet sets names[0]
	envName string   // the one of names that UCX reads from the environment
	size    int      // the size ucxnet asks for
	dflt    int      // UCX's own default
	max     int      // the largest UCX handles
	slack   int      // bytes of a segment that are UCX's and ucxnet's headers
}

var (
	// Shm is the shared-memory FIFO segment (posix and sysv inherit
	// MM_SEG_SIZE; UCX 1.13 ignores POSIX_/SYSV_SEG_SIZE given through
	// ucp_config_modify, measured): 32 KiB frames. A power of two keeps
	// common write sizes (64 KiB, 1 MiB) whole frames. Measured against
	// UCX's 8256-byte segments with 8000-byte frames: 64 KiB writes 3.4 →
	// 11 GB/s, 1 MiB writes 4.6 → 13 GB/s. Segments must stay below 64 KiB:
	// a FIFO element's length is 16 bits in UCX 1.13, and with a
	// 65792-byte segment a fragmented message trips an assertion in UCP's
	// active-message code that aborts the process.
	Shm = &Segment{
		names:   []string{"MM_SEG_SIZE", "POSIX_SEG_SIZE", "SYSV_SEG_SIZE"},
		envName: "MM_SEG_SIZE",
		size:    32<<10 + 256, dflt: 8256, max: 1<<16 - 1, slack: 256,
	}
	// TCP is UCX's TCP receive segment: 1 MiB frames, so a 1 MiB write is
	// one UCX message received with one recv. Measured against the default
	// 64 KiB (63 KiB frames): 1 MiB writes 2.8 → 3.5 GB/s.
	TCP = &Segment{
		// Set as RX_SEG_SIZE: UCX 1.13 ignores TCP_RX_SEG_SIZE given
		// through ucp_config_modify (measured), though the environment
		// variable is UCX_TCP_RX_SEG_SIZE.
		names:   []string{"RX_SEG_SIZE", "TCP_RX_SEG_SIZE"},
		envName: "TCP_RX_SEG_SIZE",
		size:    1<<20 + 1024, dflt: 64 << 10, max: 1 << 30, slack: 1024,
	}
)

// Names returns the UCX settings (without UCX_) that set s.
func (s *Segment) Names() []string { return slices.Clone(s.names) }

// DefaultFrame is the largest frame payload that fits one segment of UCX's
// default size: what a peer that does not say takes.
func (s *Segment) DefaultFrame() int { return s.dflt - s.slack }

// ModifyName returns the name under which ucp_config_modify sets s in UCX
// release (as "1.13.1"): names[0], except for the tcp segment from UCX
// 1.18 on. Up to 1.17 a setting passed to ucp_config_modify matches a
// component's setting by the name without its prefix (RX_SEG_SIZE), and
// the whole name (TCP_RX_SEG_SIZE) is ignored ("invalid configuration");
// 1.18 matches whole names only and ignores RX_SEG_SIZE, and from 1.21
// ucp_config_modify refuses it (UCS_ERR_INVALID_PARAM: the worker does not
// start). Measured with 1.13.1, 1.16.0, 1.18.1 and 1.22.0.
func (s *Segment) ModifyName(release string) string {
	if s == TCP {
		if maj, min, ok := MajorMinor(release); ok && (maj > 1 || min >= 18) {
			return "TCP_RX_SEG_SIZE"
		}
	}
	return s.names[0]
}

// segmentNamed returns the segment a UCX setting sizes, or nil.
func segmentNamed(name string) *Segment {
	for _, s := range []*Segment{Shm, TCP} {
		if slices.Contains(s.names, name) {
			return s
		}
	}
	return nil
}

// userValue returns the segment size the user set (in the environment or
// a Config.UCX map), or "".
func (s *Segment) userValue(user map[string]string) string {
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

// Frame returns the largest frame payload that fits one segment: of
// ucxnet's size, or of the one the user set in user (a Config.UCX map) or
// the environment (UCX's default if that cannot be parsed).
func (s *Segment) Frame(user map[string]string) int {
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

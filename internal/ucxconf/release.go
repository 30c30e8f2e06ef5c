package ucxconf

import (
	"fmt"
	"strconv"
	"strings"
)

// MajorMinor parses the major and minor numbers of a release "1.13[.1]".
func MajorMinor(v string) (major, minor int, ok bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	maj, err1 := strconv.Atoi(parts[0])
	min, err2 := strconv.Atoi(parts[1])
	return maj, min, err1 == nil && err2 == nil
}

// ReleaseWarning says what is wrong when the loaded release differs from
// the one ucxnet was built against (builtFor, "1.13") in a way that
// matters, or "": a loaded release older than the headers may lack
// functions or flags the build uses (UCX keeps its API backward
// compatible, not forward), and another major release is another API. A
// newer minor release than the headers is fine.
func ReleaseWarning(loaded, builtFor string) string {
	lmaj, lmin, ok1 := MajorMinor(loaded)
	bmaj, bmin, ok2 := MajorMinor(builtFor)
	switch {
	case !ok1 || !ok2:
		return ""
	case lmaj != bmaj:
		return fmt.Sprintf("UCX %s is loaded, but ucxnet was built against UCX %s: another major release; rebuild against the UCX in use", loaded, builtFor)
	case lmin < bmin:
		return fmt.Sprintf("UCX %s is loaded, older than the UCX %s headers ucxnet was built against: functions or flags of %s may be missing; rebuild against the UCX in use, or point LD_LIBRARY_PATH at %s", loaded, builtFor, builtFor, builtFor)
	}
	return ""
}

// LoopbackTCPClash reports whether a dialer of UCX release ours must not
// dial a listener of release theirs over UCX: a dialer of UCX 1.22 or
// later, a listener of 1.21 or earlier on the same host, no shared memory
// allowed (tcpOnly), and loopback among the devices UCX may use
// (netDevices, a UCX_NET_DEVICES value). UCX 1.22 packs the tcp
// transport's loopback device address with a 12-byte namespace id where
// earlier releases pack 16 bytes (ucs_sys_ns_t went from ino_t to 32
// bits), and an earlier release misreads it: such a listener finds no lane
// to the dialer and aborts in its wireup (the "cfg_index != NULL"
// assertion, measured with 1.13.1 and 1.18.1). Over shared memory,
// and over tcp on other interfaces, the pair works, and so does the other
// direction.
func LoopbackTCPClash(ours, theirs string, sameHost, tcpOnly bool, netDevices string) bool {
	omaj, omin, ok1 := MajorMinor(ours)
	tmaj, tmin, ok2 := MajorMinor(theirs)
	if !ok1 || !ok2 || !sameHost || !tcpOnly || omaj != 1 || tmaj != 1 || omin < 22 || tmin >= 22 {
		return false
	}
	if netDevices == "" || netDevices == "all" {
		return true
	}
	for _, d := range strings.Split(netDevices, ",") {
		if strings.TrimSpace(d) == "lo" || strings.HasPrefix(strings.TrimSpace(d), "lo:") {
			return true
		}
	}
	return false
}

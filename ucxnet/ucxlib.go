package ucxnet

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/ucxnet/ucxnet/internal/progress"
	"github.com/ucxnet/ucxnet/registry"
)

// UCXLibrary describes the UCX library this process runs on.
type UCXLibrary struct {
	// Version is the release loaded, e.g. "1.13.1"; "" in a build without
	// UCX (no cgo, or not Linux).
	Version string
	// BuiltFor is the release whose headers ucxnet was compiled against,
	// as major.minor ("1.13").
	BuiltFor string
	// Path is the file the UCP library was loaded from, if known.
	Path string
}

// UCX returns the UCX library in use.
func UCX() UCXLibrary { return ucxLibrary() }

// ucxLibrary finds the library once: it cannot change in a process, and
// finding its path reads /proc/self/maps, which handshakes must not do
// for every CONNECT and ACCEPT.
var ucxLibrary = sync.OnceValue(func() UCXLibrary {
	return UCXLibrary{Version: progress.Version(), BuiltFor: progress.BuildRelease(), Path: progress.LibraryPath()}
})

// Warning says what is wrong when the loaded release differs from the one
// ucxnet was built against in a way that matters, or "": a loaded release
// older than the headers may lack functions or flags the build uses (UCX
// keeps its API backward compatible, not forward), and another major
// release is another API. A newer minor release than the headers is fine.
func (l UCXLibrary) Warning() string {
	lmaj, lmin, ok1 := majorMinor(l.Version)
	bmaj, bmin, ok2 := majorMinor(l.BuiltFor)
	switch {
	case !ok1 || !ok2:
		return ""
	case lmaj != bmaj:
		return fmt.Sprintf("UCX %s is loaded, but ucxnet was built against UCX %s: another major release; rebuild against the UCX in use", l.Version, l.BuiltFor)
	case lmin < bmin:
		return fmt.Sprintf("UCX %s is loaded, older than the UCX %s headers ucxnet was built against: functions or flags of %s may be missing; rebuild against the UCX in use, or point LD_LIBRARY_PATH at %s", l.Version, l.BuiltFor, l.BuiltFor, l.BuiltFor)
	}
	return ""
}

// majorMinor parses the major and minor numbers of a release "1.13[.1]".
func majorMinor(v string) (int, int, bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	maj, err1 := strconv.Atoi(parts[0])
	min, err2 := strconv.Atoi(parts[1])
	return maj, min, err1 == nil && err2 == nil
}

// releasePair names the listener's UCX release (from its registry entry,
// or the address) and this process's, when they differ: for the errors of
// a dial that failed, so that a mixed pair says which two releases met.
func releasePair(e registry.Entry) string {
	theirs := e.Meta[MetaUCXRelease]
	if theirs == "" {
		theirs = progress.AddressRelease(e.Address)
	}
	ours := UCX().Version
	if theirs == "" || ours == "" || theirs == ours {
		return ""
	}
	return fmt.Sprintf(" (the listener runs UCX %s, this process UCX %s)", theirs, ours)
}

// loggedReleases holds the UCX releases of dialers whose worker address
// this process could not take, logged once each.
var loggedReleases sync.Map

// logUnusableAddress logs, once per dialing UCX release, that a CONNECT
// from a worker of that release went unanswered because its address is
// not one this process's UCX can take (err says why; Stats.Refused and
// BadFrames count each). An address of this process's own release is a
// forgery, not a mixed pair, and is only counted.
func logUnusableAddress(peerUCX string, err error) {
	ours := UCX().Version
	if peerUCX == "" || peerUCX == ours || errors.Is(err, errTooManyPeers) || errors.Is(err, errClaimedAddr) {
		return
	}
	if _, dup := loggedReleases.LoadOrStore(peerUCX, true); dup {
		return
	}
	slog.Warn("ucxnet: a dialer's UCX worker address is not one this process can take; its dials go unanswered",
		"peer_ucx", peerUCX, "ucx", ours, "err", err)
}

// releaseClash says why this process must not dial the listener of entry
// e over UCX, or "". UCX 1.22 packs the tcp transport's loopback device
// address with a 12-byte namespace id where earlier releases pack 16 bytes
// (ucs_sys_ns_t went from ino_t to 32 bits), and an earlier release
// misreads it: a listener of UCX 1.21 or older that has nothing but tcp
// over loopback in common with a 1.22 dialer finds no lane to it and
// aborts in its wireup (ucp_worker.inl "cfg_index != NULL" assertion,
// measured with 1.13.1 and 1.18.1). Over shared memory, and over tcp on
// other interfaces, the pair works, and so does the other direction.
func (t *Transport) releaseClash(e registry.Entry) string {
	if maj, min, ok := majorMinor(UCX().Version); !ok || maj == 1 && min < 22 {
		return "" // only a 1.22 (or later) dialer can clash
	}
	tls, tlsSet := effectiveTLS(t.cfg.UCX)
	devs := t.netDevices()
	_, _, host := registry.CurrentProcess()
	if !loopbackTCPClash(UCX().Version, listenerRelease(e), e.Host == host, tlsSet && !sharedMemoryEnabled(tls), devs) {
		return ""
	}
	return fmt.Sprintf("the listener runs UCX %s and this process UCX %s: with only tcp over loopback between them (UCX_TLS=%s, UCX_NET_DEVICES=%q), UCX 1.21 and older misread UCX 1.22's loopback address and abort; allow shared memory in UCX_TLS or use another interface", listenerRelease(e), UCX().Version, tls, devs)
}

// listenerRelease is the UCX release a registry entry's listener runs:
// from its meta, else from its address ("1.15" for an address of a release
// before 1.16, which packs none); "" if unknown.
func listenerRelease(e registry.Entry) string {
	if v := e.Meta[MetaUCXRelease]; v != "" {
		return v
	}
	if v := progress.AddressRelease(e.Address); v != "" {
		return v
	}
	if progress.ValidAddress(e.Address) {
		return "1.15"
	}
	return ""
}

// loopbackTCPClash is releaseClash's rule: a dialer of UCX 1.22 or later,
// a listener of 1.21 or earlier on the same host, no shared memory allowed,
// and loopback among the devices UCX may use.
func loopbackTCPClash(ours, theirs string, sameHost, tcpOnly bool, netDevices string) bool {
	omaj, omin, ok1 := majorMinor(ours)
	tmaj, tmin, ok2 := majorMinor(theirs)
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

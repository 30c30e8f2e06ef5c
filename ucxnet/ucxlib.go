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
func UCX() UCXLibrary {
	return UCXLibrary{Version: progress.Version(), BuiltFor: progress.BuildRelease(), Path: progress.LibraryPath()}
}

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

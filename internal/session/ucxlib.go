package session

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/ucxnet/ucxnet/internal/ucxconf"
	"github.com/ucxnet/ucxnet/registry"
)

// UCXLibrary describes the UCX library this process runs on. Its fields
// mean what ucxnet.UCXLibrary's do: ucxnet converts one to the other, so
// the two have the same fields in the same order.
type UCXLibrary struct {
	Version  string
	BuiltFor string
	Path     string
}

// Warning says what is wrong when the loaded release differs from the one
// ucxnet was built against in a way that matters, or "": a loaded release
// older than the headers may lack functions or flags the build uses (UCX
// keeps its API backward compatible, not forward), and another major
// release is another API. A newer minor release than the headers is fine.
func (l UCXLibrary) Warning() string { return ucxconf.ReleaseWarning(l.Version, l.BuiltFor) }

// loggedReleases holds the UCX releases of dialers whose worker address
// this process could not take, logged once each.
var loggedReleases sync.Map

// logUnusableAddress logs, once per dialing UCX release (ours is this
// process's), that a CONNECT
// from a worker of that release went unanswered because its address is
// not one this process's UCX can take (err says why; Stats.Refused and
// BadFrames count each). An address of this process's own release is a
// forgery, not a mixed pair, and is only counted.
func logUnusableAddress(ours, peerUCX string, err error) {
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
// e over UCX, or "": ucxconf.LoopbackTCPClash's pair (a UCX 1.22 dialer,
// a listener of 1.21 or older, only tcp over loopback between them),
// which makes the listener abort.
func (r *lanePolicy) releaseClash(e registry.Entry) string {
	if maj, min, ok := ucxconf.MajorMinor(r.lib.Version); !ok || maj == 1 && min < 22 {
		return "" // only a 1.22 (or later) dialer can clash
	}
	tls, tlsSet := ucxconf.EffectiveTLS(r.cfg.UCX)
	devs := r.netDevices()
	_, _, host := registry.CurrentProcess()
	if !ucxconf.LoopbackTCPClash(r.lib.Version, r.ucx.listenerRelease(e), e.Host == host, tlsSet && !ucxconf.SharedMemoryEnabled(tls), devs) {
		return ""
	}
	return fmt.Sprintf("the listener runs UCX %s and this process UCX %s: with only tcp over loopback between them (UCX_TLS=%s, UCX_NET_DEVICES=%q), UCX 1.21 and older misread UCX 1.22's loopback address and abort; allow shared memory in UCX_TLS or use another interface", r.ucx.listenerRelease(e), r.lib.Version, tls, devs)
}

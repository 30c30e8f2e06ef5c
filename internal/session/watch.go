package session

// The process-wide watches that ride on every engine's ticks
// (Transport.tickAll): the close-on-exec sweep and the repair of stuck
// shared-memory FIFOs. Descriptors and FIFOs are the process's, shared by
// all its Transports, so there is one of each.

import (
	"os"
	"sync"

	"github.com/ucxnet/ucxnet/internal/cloexec"
	"github.com/ucxnet/ucxnet/internal/smfifo"
)

// EnvNoCloexec names the environment variable that, set to "1", keeps
// ucxnet from marking the descriptors UCX creates close-on-exec (Linux;
// see docs/RELIABILITY.md, "Hostile peers"). Read once, when the package is
// initialised.
const EnvNoCloexec = "UCXNET_NO_CLOEXEC"

// fdSweep marks UCX's descriptors close-on-exec: when a worker is
// created, after each endpoint is made (a dial, a CONNECT) and when an
// ACCEPT arrives (UCX's async thread accepts tcp connections on its own),
// then at each engine tick for a second after, since UCX makes more
// sockets while it wires the endpoint up; at once, however recent the last
// sweep, before Dial or Accept returns a conn over UCX (sweepUCXFDs); and
// at a tick once a second otherwise, for the connections UCX accepts from
// anyone who connects to its tcp port.
var fdSweep = cloexec.New(os.Getenv(EnvNoCloexec) == "1")

// smWatch publishes a shared-memory FIFO slot that a peer killed mid-write
// left unpublished, so that this process does not go deaf over shared
// memory (UCX 1.13, Linux); peers' failures and stops tell it when.
var (
	smWatchOnce sync.Once
	smWatcher   *smfifo.Watcher
)

// smWatch returns the process's watcher, made for UCX release version on
// first use (a process loads one UCX library).
func smWatch(version string) *smfifo.Watcher {
	smWatchOnce.Do(func() { smWatcher = smfifo.New(version) })
	return smWatcher
}

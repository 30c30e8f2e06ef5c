package session

// A transport without UCX: in a build without cgo (CGO_ENABLED=0) or off
// Linux, NewTransport runs on noUCX, an engine that has no transport, so
// that Listen and Dial work over the kernel-TCP lane alone (lane.go): the
// same program runs on a laptop and uses UCX in production.

import (
	"os"
	"time"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// noUCXAddress is what a listener without UCX publishes as its worker
// address (the registry wants one): no UCX release reads it as an
// address, so a dialer sees a peer without UCX.
var noUCXAddress = []byte("ucxnet: no UCX (kernel tcp only)")

// noUCX is the engine of a transport without UCX, and noWorker its
// worker: every endpoint operation fails.
type (
	noUCX    struct{ err error } // err: the binding's Unsupported
	noWorker struct{ err error }
)

// startNoUCX returns noUCX for err, the binding's error saying this build
// has no UCX, unless the lane is forced to UCX: then err.
func startNoUCX(cfg Config, err error) (engine.Engine, error) {
	lane := cfg.Lane
	if lane == "" {
		lane = os.Getenv(EnvLane)
	}
	if lane == LaneUCX {
		return nil, err
	}
	return noUCX{err}, nil
}

func (noUCX) Address() []byte                          { return noUCXAddress }
func (e noUCX) Acquire(bool) engine.Worker             { return noWorker(e) }
func (noUCX) Stats(engine.EP) engine.Stats             { return engine.Stats{} }
func (noUCX) Backlog(engine.EP) uint64                 { return 0 }
func (noUCX) Release(...stream.Ref)                    {}
func (noUCX) Close(time.Duration) error                { return nil }
func (w noWorker) Connect([]byte) (engine.EP, error)   { return engine.EP{}, w.err }
func (noWorker) Flush(engine.EP, uint64) (bool, error) { return true, nil }
func (noWorker) CloseEP(engine.EP, bool) error         { return nil }
func (noWorker) GiveBack()                             {}
func (w noWorker) Send(engine.EP, engine.Frames) (int, bool, error) {
	return 0, false, w.err
}

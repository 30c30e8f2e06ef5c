package ucxnet

// A transport without UCX: in a build without cgo (CGO_ENABLED=0) or off
// Linux, NewTransport runs on noUCX, an engine that has no transport, so
// that Listen and Dial work over the kernel-TCP lane alone (lane.go): the
// same program runs on a laptop and uses UCX in production.

import (
	"errors"
	"os"
	"time"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/progress"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// noUCXAddress is what a listener without UCX publishes as its worker
// address (the registry wants one): no UCX release reads it as an
// address, so a dialer sees a peer without UCX.
var noUCXAddress = []byte("ucxnet: no UCX (kernel tcp only)")

// noUCX is the engine of a transport without UCX.
type noUCX struct{}

// startNoUCX returns noUCX when err says this build has no UCX and the
// lane is not forced to UCX; else err.
func startNoUCX(cfg Config, err error) (engine.Engine, error) {
	lane := cfg.Lane
	if lane == "" {
		lane = os.Getenv(EnvLane)
	}
	if !errors.Is(err, progress.ErrUnsupported) || lane == LaneUCX {
		return nil, err
	}
	return noUCX{}, nil
}

func (noUCX) Address() []byte                       { return noUCXAddress }
func (noUCX) Connect([]byte) (engine.EP, error)     { return engine.EP{}, ErrUnsupported }
func (noUCX) CloseEP(engine.EP, bool) error         { return nil }
func (noUCX) Flush(engine.EP, uint64) (bool, error) { return true, nil }
func (noUCX) Send(engine.EP, []byte, []byte) error  { return ErrUnsupported }
func (noUCX) Queued()                               {}
func (noUCX) SendQueued() error                     { return nil }
func (noUCX) Release(...stream.Ref)                 {}
func (noUCX) Transports(engine.EP) []string         { return nil }
func (noUCX) Buffered() uint64                      { return 0 }
func (noUCX) BufferedTo(engine.EP) uint64           { return 0 }
func (noUCX) Stats() engine.Stats                   { return engine.Stats{} }
func (noUCX) Close(time.Duration) error             { return nil }
func (noUCX) SendFrames(engine.EP, []byte, int, int, uint64, []byte, int) (int, bool, error) {
	return 0, false, ErrUnsupported
}
func (noUCX) TrySendFrames(engine.EP, []byte, int, int, uint64, []byte, int) (int, bool, bool, error) {
	return 0, false, false, ErrUnsupported
}
func (noUCX) SendFramesZC(engine.EP, []byte, int, int, uint64, []byte, int, uint64) (int, bool, error) {
	return 0, false, ErrUnsupported
}

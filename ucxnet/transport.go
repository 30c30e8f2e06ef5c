package ucxnet

import (
	"sync"

	"github.com/ucxnet/ucxnet/internal/session"
	"github.com/ucxnet/ucxnet/registry"
)

// Transport is a set of UCX workers (Config.Workers), each with its
// progress engine, and the conns and listeners that use them. A process
// may run several; the package-level Dial and Listen use a default one
// created on first use. Two Transports in one process talk over real UCX
// transports (shared memory, TCP, ...), not UCX's in-worker loopback.
type Transport struct {
	t *session.Transport
}

// NewTransport starts a transport: a UCP context per worker,
// Config.Workers workers and their progress engines.
func NewTransport(cfg Config) (*Transport, error) {
	return newTransportOn(cfg, nil)
}

// newTransportOn starts a transport whose engines start makes: UCX ones
// (nil), or the in-memory ones of tests.
func newTransportOn(cfg Config, start session.StartEngine) (*Transport, error) {
	t, err := session.NewTransport(session.Config(cfg), ucxBinding(start))
	if err != nil {
		return nil, err
	}
	return &Transport{t: t}, nil
}

var (
	defaultOnce sync.Once
	defaultT    *Transport
	defaultErr  error
)

// DefaultTransport returns the process-wide transport that the
// package-level functions use, starting it on first use.
func DefaultTransport() (*Transport, error) {
	defaultOnce.Do(func() { defaultT, defaultErr = NewTransport(Config{}) })
	return defaultT, defaultErr
}

// session returns the session transport t faces; nil for nil (the
// default transport).
func (t *Transport) session() *session.Transport {
	if t == nil {
		return nil
	}
	return t.t
}

// Name returns the transport's display name.
func (t *Transport) Name() string { return t.t.Name() }

// Registry returns the registry the transport publishes to and resolves in.
func (t *Transport) Registry() registry.Registry { return t.t.Registry() }

// Close closes the transport's listeners, resets its conns (their peers see
// ECONNRESET), closes its endpoints and stops UCX. Close of the default
// transport is allowed but makes the package-level functions fail.
func (t *Transport) Close() error { return t.t.Close() }

// Conns returns a snapshot of every conn of the transport: dialing,
// waiting for Accept, open, or closed and waiting for the peer's FIN.
// Conns that are finished (both sides closed, reset or failed) are not
// listed. The oldest come first.
func (t *Transport) Conns() []ConnStats { return connStats(t.t.Conns()) }

// LaneStats returns the kernel-TCP lane's counters.
func (t *Transport) LaneStats() LaneStats { return LaneStats(t.t.LaneStats()) }

// LaneTo returns the lane a dial to name would take, and why.
func (t *Transport) LaneTo(name string) (LaneInfo, error) {
	info, err := t.t.LaneTo(name)
	return LaneInfo(info), err
}

// LaneDevices returns where the transport's listeners listen on the
// kernel-TCP lane, in UCX_NET_DEVICES's syntax ("" for every interface),
// and why. Unless UCX_NET_DEVICES (Config.NetDevices) names devices: with
// a registry only this host reads (a directory, the memory registry), the
// loopback interface; with a shared one (a registry server, etcd), every
// interface. (UCX's own tcp transport, when in use, listens on every
// interface UCX_NET_DEVICES allows: `ucxnet info` lists them.)
func (t *Transport) LaneDevices() (devices, reason string) { return t.t.LaneDevices() }

// Snapshot returns the transport's state now.
func (t *Transport) Snapshot() Snapshot { return snapshot(t.t.Snapshot()) }

// Stats returns the transport's counters.
func (t *Transport) Stats() Stats { return Stats(t.t.Stats()) }

// StatsSocket returns the path of the transport's stats socket, "" if it
// has none.
func (t *Transport) StatsSocket() string { return t.t.StatsSocket() }

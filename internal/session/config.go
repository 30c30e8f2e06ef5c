package session

// Config and its defaults, and the UCX settings ucxnet applies.

import (
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/ucxnet/ucxnet/internal/stream"
	"github.com/ucxnet/ucxnet/registry"
)

// Defaults for Config.
const (
	DefaultEagerMax = 1 << 20 // largest frame payload
	DefaultWindow   = 4 << 20 // per-conn receive window
	DefaultBacklog  = 512     // conns waiting for Accept, per listener
	DefaultSpin     = 50 * time.Microsecond
	DefaultSpinMax  = 500 * time.Microsecond
	DefaultLinger   = 2 * time.Second
	// DefaultKeepAlive is how long a peer with conns may stay silent
	// before it is probed, and the time between probes; after
	// DefaultKeepAliveCount unanswered probes it is taken for dead (see
	// Config.KeepAlive). They are net.KeepAliveConfig's defaults.
	DefaultKeepAlive      = 15 * time.Second
	DefaultKeepAliveCount = 9
)

// Config configures a Transport. Its fields mean what ucxnet.Config's do:
// ucxnet converts its Config to this one, so the two have the same fields
// in the same order. The zero value is ready to use.
type Config struct {
	Registry   registry.Registry
	EagerMax   int
	Window     int
	Backlog    int
	Spin       time.Duration
	SpinMax    time.Duration
	UCX        map[string]string
	Name       string
	FrameSize  int
	Linger     time.Duration
	CopyWrites bool
	KeepAlive  time.Duration
	NetDevices string
	Lane       string
	Logger     *slog.Logger
	Workers    int
	StatsDir   string
}

// ZeroCopyMin is the smallest write (or window-limited part of one) that
// is sent straight from the writer's memory. Smaller writes are copied:
// the copy costs less than waiting for UCX to finish the send.
const ZeroCopyMin = 16 << 10

// envDuration is the Go duration in the environment variable name, -1 for
// a bare negative number (off), or dflt if it is unset or neither.
func envDuration(name string, dflt time.Duration) time.Duration {
	s := os.Getenv(name)
	if v, err := time.ParseDuration(s); err == nil {
		return v
	}
	if n, err := strconv.Atoi(s); err == nil && n < 0 {
		return -1 // a bare negative number ("-1") means off, as it would in seconds
	}
	return dflt
}

// withDefaults returns cfg with its zero fields set to the defaults (or
// the environment's values) and its bounds applied, as a Transport runs it.
func (cfg Config) withDefaults() Config {
	if cfg.EagerMax <= 0 {
		cfg.EagerMax = DefaultEagerMax
	}
	if cfg.EagerMax > stream.MaxPayload {
		cfg.EagerMax = stream.MaxPayload
	}
	cfg.EagerMax = max(cfg.EagerMax, minPeerFrame)
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Window > stream.MaxWindow {
		cfg.Window = stream.MaxWindow
	}
	// A window's updates grant at least a quarter of it: with 4 KiB, at
	// least 1 KiB, which the peer's ingress budget does not count
	// (ingress.go).
	cfg.Window = max(cfg.Window, minWindow)
	if cfg.Backlog <= 0 {
		cfg.Backlog = DefaultBacklog
	}
	if cfg.Spin == 0 {
		cfg.Spin = envDuration("UCXNET_SPIN", DefaultSpin)
	}
	if cfg.SpinMax == 0 {
		cfg.SpinMax = envDuration("UCXNET_SPIN_MAX", DefaultSpinMax)
	}
	if cfg.Spin <= 0 {
		cfg.Spin, cfg.SpinMax = 0, 0
	}
	if cfg.Name == "" {
		cfg.Name = registry.UniqueName()
	}
	if cfg.FrameSize <= 0 {
		if v, err := strconv.Atoi(os.Getenv("UCXNET_FRAME_SIZE")); err == nil && v > 0 {
			cfg.FrameSize = v
		}
	}
	if cfg.Linger == 0 {
		cfg.Linger = DefaultLinger
	}
	if cfg.KeepAlive == 0 {
		cfg.KeepAlive = envDuration("UCXNET_KEEPALIVE", DefaultKeepAlive)
	}
	if cfg.NetDevices != "" {
		ucx := make(map[string]string, len(cfg.UCX)+1)
		for k, v := range cfg.UCX {
			ucx[k] = v
		}
		ucx["NET_DEVICES"] = cfg.NetDevices
		cfg.UCX = ucx
	}
	if os.Getenv("UCXNET_COPY_WRITES") == "1" {
		cfg.CopyWrites = true
	}
	if cfg.Workers <= 0 {
		cfg.Workers = workersDefault()
		if v, err := strconv.Atoi(os.Getenv(envWorkers)); err == nil && v > 0 {
			cfg.Workers = v
		}
	}
	cfg.Workers = min(cfg.Workers, maxWorkers)
	return cfg
}

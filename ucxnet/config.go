package ucxnet

// Config and its defaults.

import (
	"log/slog"
	"time"

	"github.com/ucxnet/ucxnet/internal/session"
	"github.com/ucxnet/ucxnet/registry"
)

// Defaults for Config.
const (
	DefaultEagerMax       = session.DefaultEagerMax       // largest frame payload
	DefaultWindow         = session.DefaultWindow         // per-conn receive window
	DefaultBacklog        = session.DefaultBacklog        // conns waiting for Accept, per listener
	DefaultSpin           = session.DefaultSpin           // Config.Spin
	DefaultSpinMax        = session.DefaultSpinMax        // Config.SpinMax
	DefaultLinger         = session.DefaultLinger         // Config.Linger
	DefaultKeepAlive      = session.DefaultKeepAlive      // keepalive idle time and interval (Config.KeepAlive)
	DefaultKeepAliveCount = session.DefaultKeepAliveCount // unanswered keepalive probes before a peer is failed
)

// Config configures a Transport: its workers, frame size, receive window,
// backlog, lane choice, keepalive, linger, registry, logger, stats
// directory and UCX settings. The zero value is ready to use.
type Config struct {
	// Registry is where listeners publish and dialers resolve names. Nil
	// means the one UCXNET_REGISTRY selects (default: the per-user directory
	// registry).
	Registry registry.Registry
	// EagerMax is the largest frame payload this transport accepts; the
	// frame size of a conn is the smaller of both sides'. Default 1 MiB,
	// at least 1 KiB, at most 16 MiB.
	EagerMax int
	// Window is the per-conn receive window: how many bytes a peer may send
	// that the application has not read yet. Default 4 MiB, at least
	// 4 KiB, at most 256 MiB. Until Accept takes an accepted conn, it
	// advertises at most 256 KiB.
	Window int
	// Backlog bounds the conns a listener holds before Accept takes them;
	// dials beyond it are refused. Default 512.
	Backlog int
	// Spin is how long the progress engine polls after activity before it
	// sleeps: more spin trades CPU for latency. Default: $UCXNET_SPIN if
	// set (a Go duration), else 50 µs; negative (or $UCXNET_SPIN=0) means
	// never spin, SpinMax included.
	Spin time.Duration
	// SpinMax bounds a longer spin after bulk frames (32 KiB or more of
	// payload). When the engine fell asleep after such a frame and the
	// next one came within SpinMax, the spin after bulk frames grows to
	// cover that gap (at least doubling); a longer gap, or none following,
	// halves it, down to Spin. A stream whose frames come a few hundred µs
	// apart then pays the wake-up (80–130 µs on a small VM) about once per
	// burst instead of once per frame, for up to SpinMax of polling per
	// gap; traffic of smaller frames keeps the plain Spin. Default:
	// $UCXNET_SPIN_MAX if set, else 500 µs; negative or at most Spin keeps
	// the spin fixed.
	SpinMax time.Duration
	// UCX holds UCX settings (names without the UCX_ prefix) applied on top
	// of the environment.
	UCX map[string]string
	// Name is this transport's display name (a dialing conn's LocalAddr).
	// Default: a unique name.
	Name string
	// FrameSize is the payload size writes are cut into (at most the
	// smaller EagerMax of both sides, and at most what the peer's UCX
	// receive segments hold, which its handshake says). Zero picks one per
	// peer from the UCX transports in use, so that a frame fits one
	// receive segment: 32 KiB over shared memory, 1 MiB over TCP, 63 KiB
	// over RDMA. $UCXNET_FRAME_SIZE sets it too.
	FrameSize int
	// Linger bounds how long Close waits for UCX to hand the conn's last
	// frames to the transport (like SO_LINGER), so that a process that
	// exits right after Close loses nothing. Default 2 s; negative means
	// Close does not wait.
	Linger time.Duration
	// CopyWrites makes Write copy every frame into C memory before handing
	// it to UCX, as it always does over TCP and RDMA. By default, over
	// shared memory, writes of ZeroCopyMin bytes or more are sent straight
	// from the writer's memory (pinned until UCX is done with it, which
	// Write waits for): one copy less. $UCXNET_COPY_WRITES=1 sets it too.
	CopyWrites bool
	// KeepAlive is the keepalive's idle time and interval, as
	// net.Dialer.KeepAlive's: a peer that this transport has conns with
	// and that stays silent for KeepAlive is probed with a PING (per
	// peer, not per conn; its progress engine answers whatever its
	// application does), again every KeepAlive, and after
	// DefaultKeepAliveCount unanswered probes it is taken for dead: its
	// conns fail with ECONNRESET (blocked Reads and Writes included).
	// Conn.SetKeepAliveConfig sets all three per conn. A dial not answered
	// within twice KeepAlive (3 s at most) fails with ECONNREFUSED.
	// Default: $UCXNET_KEEPALIVE if set (a Go duration), else
	// DefaultKeepAlive (net.KeepAliveConfig's defaults: 15 s, 9 probes);
	// negative disables it, as with net.Dialer.KeepAlive. A peer on this
	// host is known by the kernel instead (a unix socket between the two
	// Transports): its exit fails its conns at once, and while its process
	// lives (stopped, frozen, starved of CPU) keepalive never fails it
	// (Stats.KeepAliveKernel), as TCP's kernel answers for such a process.
	KeepAlive time.Duration
	// NetDevices restricts the network devices UCX uses (and listens on),
	// as UCX_NET_DEVICES does: for example "lo" or "eth0,mlx5_0:1". By
	// default UCX's tcp transport listens on every interface's address, so
	// a process that listens on a ucxnet name is reachable from every
	// network the host is on. Empty: UCX's default (or $UCX_NET_DEVICES).
	NetDevices string
	// Lane forces the lane of the conns this transport dials: "ucx" (UCX
	// active messages), "tcp" (a kernel TCP connection) or "auto" (per
	// peer: UCX where it has shared memory or RDMA to the peer, kernel TCP
	// where it would only have tcp; see Conn.Lane). Empty: $UCXNET_LANE,
	// else auto. "ucx" also keeps listeners off kernel TCP.
	Lane string
	// Logger receives the rare events: peers failing or taken for dead
	// (keepalive), handshakes refused (no listener, full backlog, failed
	// authentication), frames dropped as malformed or foreign, and which
	// lane a dial took (debug level). The records a peer's input causes
	// are rate-limited (a burst of 10, then one a second) with a count of
	// those suppressed. Most records are logged on the goroutine that
	// drives UCX, holding no lock of the transport: its handler may call
	// the transport (Conns, Snapshot) but must not block, or it holds up
	// all traffic. Nil: no logging.
	Logger *slog.Logger
	// Workers is how many UCX workers the transport runs, each with a
	// progress goroutine of its own; conns are spread across them
	// round-robin, so that receiving is not serialized on one goroutine
	// (docs/PERFORMANCE.md). A conn moves to another worker only with a
	// peer that also runs several (docs/PROTOCOL.md, "Workers"); with
	// one that runs one, all of its conns stay on the worker that peer
	// knows. Default: $UCXNET_WORKERS if set, else 1 below 8 CPUs and
	// half the CPUs, at most 8, from 8 on: a worker's goroutine receives
	// at up to one core, and the other half is left to the application's
	// readers and writers, which copy the same bytes once more. At most
	// 64.
	Workers int
	// StatsDir is the directory where the transport serves its Snapshot
	// on a Unix socket of its own (mode 0600, answering only this user and root),
	// for `ucxnet ls`. Empty: $UCXNET_STATS_DIR, else ".stats" in the
	// default registry directory (see StatsDir). "off" (StatsOff), as
	// either, serves none. Linux only.
	StatsDir string
}

// The lanes, as Config.Lane and $UCXNET_LANE name them.
const (
	LaneAuto = session.LaneAuto // ucxnet picks per peer (the default)
	LaneUCX  = session.LaneUCX  // UCX active messages
	LaneTCP  = session.LaneTCP  // a kernel TCP connection (Go's net)
)

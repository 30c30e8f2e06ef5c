package ucxnet

// ucxnet's API over the session (internal/session), where the conns,
// listeners and transports are implemented: each name here is the
// session's, with the same meaning.

import (
	"net"

	"github.com/ucxnet/ucxnet/internal/session"
)

// Addr is a conn's or listener's address, "name:id" (see session.Addr).
type Addr = session.Addr

// Config configures a Transport (see session.Config).
type Config = session.Config

// Conn is a conn over UCX or the kernel-TCP lane; it implements net.Conn
// (see session.Conn).
type Conn = session.Conn

// ConnStats is what one conn is doing (see session.ConnStats).
type ConnStats = session.ConnStats

// Dialer dials conns (see session.Dialer).
type Dialer = session.Dialer

// LaneInfo is the lane a dial to a name would take, and why (see
// session.LaneInfo).
type LaneInfo = session.LaneInfo

// LaneStats counts a transport's kernel-TCP lane (see session.LaneStats).
type LaneStats = session.LaneStats

// ListenConfig configures a Listener (see session.ListenConfig).
type ListenConfig = session.ListenConfig

// Listener accepts conns; it implements net.Listener (see
// session.Listener).
type Listener = session.Listener

// Snapshot is what a transport is doing, as `ucxnet ls` shows it (see
// session.Snapshot).
type Snapshot = session.Snapshot

// Stats counts a transport's conns, frames and failures (see
// session.Stats).
type Stats = session.Stats

// Transport is a set of UCX workers and the conns and listeners that use
// them (see session.Transport).
type Transport = session.Transport

// UCXLibrary describes the UCX library this process runs on (see
// session.UCXLibrary).
type UCXLibrary = session.UCXLibrary

// Defaults for Config.
const (
	DefaultEagerMax  = session.DefaultEagerMax  // largest frame payload
	DefaultWindow    = session.DefaultWindow    // per-conn receive window
	DefaultBacklog   = session.DefaultBacklog   // conns waiting for Accept, per listener
	DefaultSpin      = session.DefaultSpin      // Config.Spin
	DefaultSpinMax   = session.DefaultSpinMax   // Config.SpinMax
	DefaultLinger    = session.DefaultLinger    // Config.Linger
	DefaultKeepAlive = session.DefaultKeepAlive // Config.KeepAlive
)

// The states ConnStats.State names.
const (
	ConnDialing     = session.ConnDialing     // CONNECT sent, no answer yet
	ConnAuthPending = session.ConnAuthPending // accepted, waiting for the dialer's pre-shared-key proof
	ConnOpen        = session.ConnOpen        // established, both directions open
	ConnReadClosed  = session.ConnReadClosed  // the peer closed its writing side (its FIN was received)
	ConnWriteClosed = session.ConnWriteClosed // CloseWrite: this side sent its FIN
	ConnClosing     = session.ConnClosing     // Close sent FIN; waiting for the peer's
	ConnClosed      = session.ConnClosed      // both directions closed
	ConnFailed      = session.ConnFailed      // reset, or the peer failed
)

// The lanes, as Config.Lane and $UCXNET_LANE name them.
const (
	LaneAuto = session.LaneAuto // ucxnet picks per peer (the default)
	LaneUCX  = session.LaneUCX  // UCX active messages
	LaneTCP  = session.LaneTCP  // a kernel TCP connection (Go's net)
)

// DefaultDialTimeout bounds a dial whose Dialer has no Timeout and whose
// context has no deadline (see session.DefaultDialTimeout).
const DefaultDialTimeout = session.DefaultDialTimeout

// EnvLane names the environment variable that forces a lane when
// Config.Lane is empty: "ucx", "tcp" or "auto".
const EnvLane = session.EnvLane

// EnvNoCloexec names the environment variable that, set to "1", keeps
// ucxnet from marking the descriptors UCX creates close-on-exec (see
// session.EnvNoCloexec).
const EnvNoCloexec = session.EnvNoCloexec

// EnvPSKFile names the environment variable holding the path of a file
// with the pre-shared key used when Dialer.PSK or ListenConfig.PSK is nil.
const EnvPSKFile = session.EnvPSKFile

// EnvStatsDir names the environment variable that sets the stats
// directory when Config.StatsDir is empty: a path, or "off".
const EnvStatsDir = session.EnvStatsDir

// ExpvarName is the expvar variable PublishExpvar publishes.
const ExpvarName = session.ExpvarName

// MaxSnapshotConns bounds the conns a Snapshot lists (see
// session.MaxSnapshotConns).
const MaxSnapshotConns = session.MaxSnapshotConns

// MetaTCP is the registry meta key of a listener's kernel-TCP endpoints
// (see session.MetaTCP).
const MetaTCP = session.MetaTCP

// MetaUCXRelease is the registry meta key of a listener's UCX release (see
// session.MetaUCXRelease).
const MetaUCXRelease = session.MetaUCXRelease

// MinPSKLen is the shortest pre-shared key accepted.
const MinPSKLen = session.MinPSKLen

// Network is the network name of ucxnet's addresses: "ucx".
const Network = session.Network

// StatsOff, as Config.StatsDir or $UCXNET_STATS_DIR, serves no stats
// socket.
const StatsOff = session.StatsOff

// StatsRequest is the request a stats socket answers with its transport's
// Snapshot (see session.StatsRequest).
const StatsRequest = session.StatsRequest

// StatsSocketSuffix ends the name of every stats socket.
const StatsSocketSuffix = session.StatsSocketSuffix

// ZeroCopyMin is the smallest write sent zero-copy (see
// session.ZeroCopyMin).
const ZeroCopyMin = session.ZeroCopyMin

// Errors a conn or dial can report, each wrapped in a *net.OpError. Test
// for them with errors.Is, as with the standard library's conns:
// errors.Is(err, syscall.ECONNREFUSED) and so on (see session.ErrRefused).
var (
	ErrRefused            = session.ErrRefused            // ECONNREFUSED
	ErrReset              = session.ErrReset              // ECONNRESET
	ErrWriteAfterShutdown = session.ErrWriteAfterShutdown // EPIPE
	ErrProtocol           = session.ErrProtocol           // ECONNRESET
	ErrTransportClosed    = session.ErrTransportClosed
)

// NewTransport starts a transport: a UCP context per worker,
// Config.Workers workers and their progress engines.
func NewTransport(cfg Config) (*Transport, error) {
	return session.NewTransport(cfg, session.StartUCX)
}

// DefaultTransport returns the process-wide transport that the
// package-level functions use, starting it on first use.
func DefaultTransport() (*Transport, error) { return session.DefaultTransport() }

// Dial connects to the listener published as address, on the default
// transport (see session.Dial).
func Dial(network, address string) (net.Conn, error) { return session.Dial(network, address) }

// Listen announces name on the default transport (see session.Listen).
func Listen(network, name string) (net.Listener, error) { return session.Listen(network, name) }

// CheckStatsDir creates dir (mode 0700) if it is missing and checks that
// it is a directory owned by this user that others cannot write (see
// session.CheckStatsDir).
func CheckStatsDir(dir string) error { return session.CheckStatsDir(dir) }

// EffectiveUCXDefaults returns the UCX settings ucxnet applies where the
// environment sets none (see session.EffectiveUCXDefaults).
func EffectiveUCXDefaults() map[string]string { return session.EffectiveUCXDefaults() }

// PeerCred returns the uid and pid of the process at the other end of a
// Unix socket (see session.PeerCred).
func PeerCred(c *net.UnixConn) (uid, pid int, err error) { return session.PeerCred(c) }

// PublishExpvar publishes Snapshots() as the expvar variable ExpvarName
// (see session.PublishExpvar).
func PublishExpvar() error { return session.PublishExpvar() }

// Snapshots returns a Snapshot of every open transport of the process,
// sorted by transport name.
func Snapshots() []Snapshot { return session.Snapshots() }

// StatsDir returns the directory of the stats sockets that cfgDir (a
// Config.StatsDir) selects (see session.StatsDir).
func StatsDir(cfgDir string) (string, error) { return session.StatsDir(cfgDir) }

// UCX returns the UCX library in use.
func UCX() UCXLibrary { return session.UCX() }

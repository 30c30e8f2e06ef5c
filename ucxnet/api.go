package ucxnet

// ucxnet's data types, constants, errors and package functions: the
// session's values under ucxnet's names (conn.go, listener.go, dial.go and
// transport.go are the face types).

import (
	"net"

	"github.com/ucxnet/ucxnet/internal/session"
)

// Addr is a ucxnet address: a name in the registry, and for a conn's end
// the conn's id at that end. A listener's Addr is the name it published
// ("echo"), which Dial accepts. A conn's LocalAddr and RemoteAddr name
// both ends as "name:id", the form net.SplitHostPort splits (a name
// containing ':' is bracketed, as net.JoinHostPort does for IPv6): the
// host is the end's transport or listener name, the port its conn id in
// 16 hex digits, e.g. "echo:4f1c0a9b2d3e5f60". One end's LocalAddr is the
// other's RemoteAddr. Dial accepts "name:id" too (the id is ignored, as a
// port is). Its fields are Name and ID; Network returns "ucx".
type Addr = session.Addr

// Config configures a Transport: its workers, frame size, receive window,
// backlog, lane choice, keepalive, linger, registry, logger, stats
// directory and UCX settings (go doc shows each field). The zero value is
// ready to use.
type Config = session.Config

// ConnStats is a snapshot of one conn (Conn.Stats, Transport.Conns): its
// addresses, lane, state (one of the Conn* states), byte and frame
// counters, buffered and queued data and round-trip estimate. Its JSON
// form is what `ucxnet ls --json` prints.
type ConnStats = session.ConnStats

// LaneInfo says which lane a dial to a name would take, and why
// (Transport.LaneTo, for `ucxnet info` and demo): Lane (LaneUCX, LaneTCP,
// or "" when neither reaches the peer), Reason, and the TCP Endpoints a
// dial would try. It resolves the name but connects to nothing.
type LaneInfo = session.LaneInfo

// LaneStats are a Transport's kernel-TCP lane counters: the conns on the
// lane now and the preambles refused (garbage, oversized, timed out, over
// the cap).
type LaneStats = session.LaneStats

// Snapshot is the state of one transport: its counters, listeners and
// conns (at most MaxSnapshotConns). Its JSON form is a stats socket's
// answer (see StatsDir) and what PublishExpvar publishes.
type Snapshot = session.Snapshot

// Stats are a Transport's counters: conns dialed, accepted and refused,
// frames and bytes each way, and the failures and drops it saw.
type Stats = session.Stats

// UCXLibrary describes the UCX library this process runs on: its version,
// the release ucxnet was built against and the library's path.
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
// context has no deadline.
const DefaultDialTimeout = session.DefaultDialTimeout

// EnvLane names the environment variable that forces a lane when
// Config.Lane is empty: "ucx", "tcp" or "auto".
const EnvLane = session.EnvLane

// EnvNoCloexec names the environment variable that, set to "1", keeps
// ucxnet from marking the descriptors UCX creates close-on-exec (for a
// program that hands them to a child on purpose).
const EnvNoCloexec = session.EnvNoCloexec

// EnvPSKFile names the environment variable holding the path of a file
// with the pre-shared key used when Dialer.PSK or ListenConfig.PSK is nil.
const EnvPSKFile = session.EnvPSKFile

// EnvStatsDir names the environment variable that sets the stats
// directory when Config.StatsDir is empty: a path, or "off".
const EnvStatsDir = session.EnvStatsDir

// ExpvarName is the expvar variable PublishExpvar publishes.
const ExpvarName = session.ExpvarName

// MaxSnapshotConns bounds the conns a Snapshot lists; the rest are counted
// in its ConnsOmitted.
const MaxSnapshotConns = session.MaxSnapshotConns

// MetaTCP is the registry meta key under which a listener publishes its
// kernel-TCP endpoints, which a dial on the TCP lane tries.
const MetaTCP = session.MetaTCP

// MetaUCXRelease is the registry meta key under which a listener publishes
// the UCX release it runs, so that a dial that fails can say which two
// releases met.
const MetaUCXRelease = session.MetaUCXRelease

// MinPSKLen is the shortest pre-shared key accepted.
const MinPSKLen = session.MinPSKLen

// Network is the network name of ucxnet's addresses: "ucx".
const Network = session.Network

// StatsOff, as Config.StatsDir or $UCXNET_STATS_DIR, serves no stats
// socket.
const StatsOff = session.StatsOff

// StatsRequest is the request a stats socket answers with its transport's
// Snapshot.
const StatsRequest = session.StatsRequest

// StatsSocketSuffix ends the name of every stats socket.
const StatsSocketSuffix = session.StatsSocketSuffix

// ZeroCopyMin is the smallest write (or window-limited part of one) sent
// zero-copy over shared memory: straight from the writer's memory, which
// Write pins until UCX is done with it.
const ZeroCopyMin = session.ZeroCopyMin

// Errors a conn or dial can report, each wrapped in a *net.OpError. Test
// for them with errors.Is, as with the standard library's conns:
// errors.Is(err, syscall.ECONNREFUSED) and so on.
var (
	ErrRefused            = session.ErrRefused            // ECONNREFUSED
	ErrReset              = session.ErrReset              // ECONNRESET
	ErrWriteAfterShutdown = session.ErrWriteAfterShutdown // EPIPE
	ErrProtocol           = session.ErrProtocol           // ECONNRESET
	ErrTransportClosed    = session.ErrTransportClosed
)

// CheckStatsDir creates dir (mode 0700) if it is missing and checks that
// it is a directory owned by this user that others cannot write.
func CheckStatsDir(dir string) error { return session.CheckStatsDir(dir) }

// EffectiveUCXDefaults returns the UCX settings ucxnet applies where the
// environment sets none.
func EffectiveUCXDefaults() map[string]string { return session.EffectiveUCXDefaults() }

// PeerCred returns the uid and pid of the process at the other end of a
// Unix socket.
func PeerCred(c *net.UnixConn) (uid, pid int, err error) { return session.PeerCred(c) }

// PublishExpvar publishes Snapshots() as the expvar variable ExpvarName
// (served by expvar's /debug/vars handler), computed when read. Calling it
// again does nothing; it returns an error, and publishes nothing, if
// another package already published a variable of that name.
func PublishExpvar() error { return session.PublishExpvar() }

// Snapshots returns a Snapshot of every open transport of the process,
// sorted by transport name.
func Snapshots() []Snapshot { return session.Snapshots() }

// StatsDir returns the directory of the stats sockets that cfgDir (a
// Config.StatsDir) selects: cfgDir, else $UCXNET_STATS_DIR, else ".stats"
// in the default registry directory (registry.DefaultDir). It returns ""
// when the socket is off.
func StatsDir(cfgDir string) (string, error) { return session.StatsDir(cfgDir) }

// UCX returns the UCX library in use.
func UCX() UCXLibrary { return session.UCX() }

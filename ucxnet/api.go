package ucxnet

// ucxnet's addresses, constants, errors and package functions, most of them
// the session's under ucxnet's names (config.go and stats.go hold the data
// types; conn.go, listener.go, dial.go and transport.go the face types).

import (
	"net"

	"github.com/ucxnet/ucxnet/internal/session"
	"github.com/ucxnet/ucxnet/internal/ucxconf"
)

// Addr is a ucxnet address: a name in the registry, and for a conn's end
// the conn's id at that end.
//
// A listener's Addr is the name it published ("echo"), which Dial accepts.
// A conn's LocalAddr and RemoteAddr name both ends as "name:id", the form
// net.SplitHostPort splits (a name containing ':' is bracketed, as
// net.JoinHostPort does for IPv6): the host is the end's transport or
// listener name, the port its conn id in 16 hex digits, e.g.
// "echo:4f1c0a9b2d3e5f60". One end's LocalAddr is the other's RemoteAddr.
// Dial accepts "name:id" too (the id is ignored, as a port is).
type Addr struct {
	Name string
	ID   uint64 // the conn's id at this end; 0: a name only (a listener, or a dial not yet answered)
}

// Network returns "ucx".
func (a Addr) Network() string { return Network }

// String returns the name, or "name:id" for a conn's end.
func (a Addr) String() string { return session.Addr(a).String() }

// faceAddr returns a session address (a session stream's or listener's)
// as ucxnet's Addr; any other address (none today) as it is.
func faceAddr(a net.Addr) net.Addr {
	if sa, ok := a.(session.Addr); ok {
		return Addr(sa)
	}
	return a
}

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

// Warning says what is wrong when the loaded release differs from the one
// ucxnet was built against in a way that matters, or "": a loaded release
// older than the headers may lack functions or flags the build uses (UCX
// keeps its API backward compatible, not forward), and another major
// release is another API. A newer minor release than the headers is fine.
func (l UCXLibrary) Warning() string { return session.UCXLibrary(l).Warning() }

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

// Network is the network name of ucxnet addresses and the one Dial and
// Listen take (Dial also takes "tcp", "tcp4" and "tcp6", so that code such
// as net/http's transport, which always dials "tcp", works unchanged;
// Listen refuses them).
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
func EffectiveUCXDefaults() map[string]string { return ucxconf.EnvDefaults(UCX().Version) }

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
func Snapshots() []Snapshot {
	ss := session.Snapshots()
	out := make([]Snapshot, len(ss))
	for i, s := range ss {
		out[i] = snapshot(s)
	}
	return out
}

// StatsDir returns the directory of the stats sockets that cfgDir (a
// Config.StatsDir) selects: cfgDir, else $UCXNET_STATS_DIR, else ".stats"
// in the default registry directory (registry.DefaultDir). It returns ""
// when the socket is off.
func StatsDir(cfgDir string) (string, error) { return session.StatsDir(cfgDir) }

// UCX returns the UCX library in use.
func UCX() UCXLibrary { return UCXLibrary(ucxLibrary()) }

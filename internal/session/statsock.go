package session

// The stats socket: each Transport serves its Snapshot, read-only, on a
// Unix socket of its own in the user's stats directory, for `ucxnet ls`
// (internal/statsock: the directory is the user's, mode 0700, the socket
// mode 0600, and only its own user or root is answered). The protocol is
// one request line, StatsRequest, answered with one JSON Snapshot and the
// end of the connection.

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"

	"github.com/ucxnet/ucxnet/internal/statsock"
	"github.com/ucxnet/ucxnet/registry"
)

// EnvStatsDir names the environment variable that sets the stats directory
// when Config.StatsDir is empty: a path, or "off" for no stats socket.
const EnvStatsDir = "UCXNET_STATS_DIR"

// StatsOff, as Config.StatsDir or $UCXNET_STATS_DIR, turns the stats
// socket off.
const StatsOff = "off"

// StatsRequest is the request line a stats socket answers.
const StatsRequest = "ucxnet-stats 1\n"

// StatsSocketSuffix ends the name of every stats socket, which is
// "PID-RANDOM" followed by it.
const StatsSocketSuffix = ".sock"

// StatsDir returns the directory of the stats sockets that cfgDir (a
// Config.StatsDir) selects: cfgDir, else $UCXNET_STATS_DIR, else ".stats"
// in the default registry directory (registry.DefaultDir; the directory
// registry ignores names starting with '.'). It returns "" when the
// socket is off.
func StatsDir(cfgDir string) (string, error) {
	d := cfgDir
	if d == "" {
		d = os.Getenv(EnvStatsDir)
	}
	if d == StatsOff {
		return "", nil
	}
	if d != "" {
		return filepath.Abs(d)
	}
	base, err := registry.DefaultDirErr()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, ".stats"), nil
}

// CheckStatsDir creates dir (mode 0700) if it is missing and checks that
// it is a directory, not a symbolic link, owned by this user and not
// writable by group or others; it sets mode 0700 if they may read it.
func CheckStatsDir(dir string) error {
	if err := statsock.CheckDir(dir); err != nil {
		return fmt.Errorf("ucxnet: %w", err)
	}
	return nil
}

// serveStats starts t's stats socket, unless it is off or cannot be made
// (then it logs why, at debug level: the transport works without it).
func (t *Transport) serveStats() {
	if !statsock.Supported {
		return
	}
	dir, err := StatsDir(t.cfg.StatsDir)
	if err == nil && dir == "" {
		return
	}
	if err == nil {
		err = CheckStatsDir(dir)
	}
	if err == nil {
		path := filepath.Join(dir, fmt.Sprintf("%d-%s%s", os.Getpid(), formatID(rand.Uint64()), StatsSocketSuffix))
		t.statsSrv, err = statsock.Listen(path, StatsRequest, func() any { return t.Snapshot() })
	}
	if err != nil {
		t.log.event(slog.LevelDebug, "ucxnet: no stats socket", "err", err)
	}
}

// StatsSocket returns the path of the transport's stats socket, "" if it
// has none.
func (t *Transport) StatsSocket() string {
	if t.statsSrv == nil {
		return ""
	}
	return t.statsSrv.Path()
}

// PeerCred returns the uid and pid of the process at the other end of a
// Unix socket connection (for `ucxnet ls`, which checks who answers); off
// Linux it returns errors.ErrUnsupported.
func PeerCred(c *net.UnixConn) (uid, pid int, err error) { return statsock.PeerCred(c) }

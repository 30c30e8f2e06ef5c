package ucxnet

// The stats socket: each Transport serves its Snapshot, read-only, on a
// Unix socket of its own in the user's stats directory, for `ucxnet ls`.
// The directory is the user's (mode 0700), the socket mode 0600, and the
// server answers only its own user (or root), checked on each connection
// (peerUID). The protocol is one request line, StatsRequest, answered
// with one JSON Snapshot and the end of the connection.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

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

// statsTimeout bounds one stats connection (request and answer). A
// variable for tests.
var statsTimeout = 2 * time.Second

// maxStatsClients bounds the stats connections served at once; more are
// closed unanswered.
const maxStatsClients = 4

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
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("ucxnet: stats directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("ucxnet: stats directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("ucxnet: stats directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("ucxnet: stats directory %s is not a directory (mode %s)", dir, fi.Mode())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("ucxnet: stats directory %s is owned by uid %d, not %d", dir, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("ucxnet: stats directory %s has mode %#o: group or others may write to it", dir, fi.Mode().Perm())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("ucxnet: stats directory: %w", err)
		}
	}
	return nil
}

// maxUnixPath is the longest path a Unix socket binds to (sun_path, less
// its terminating zero).
const maxUnixPath = 107

// statsServer serves a transport's stats socket.
type statsServer struct {
	ln   *net.UnixListener
	path string
	sem  chan struct{}
	done chan struct{}  // closed when serve returns
	wg   sync.WaitGroup // the answers in progress

	mu    sync.Mutex
	conns map[*net.UnixConn]struct{} // the connections being answered
}

// serveStats starts t's stats socket, unless it is off or cannot be made
// (then it logs why, at debug level: the transport works without it).
func (t *Transport) serveStats() {
	if !statsSupported {
		return
	}
	dir, err := StatsDir(t.cfg.StatsDir)
	if err == nil && dir == "" {
		return
	}
	if err == nil {
		err = CheckStatsDir(dir)
	}
	var path string
	if err == nil {
		path = filepath.Join(dir, fmt.Sprintf("%d-%s%s", os.Getpid(), formatID(rand.Uint64()), StatsSocketSuffix))
		if len(path) > maxUnixPath {
			err = fmt.Errorf("socket path %s longer than %d bytes", path, maxUnixPath)
		}
	}
	var ln *net.UnixListener
	if err == nil {
		ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	}
	if err == nil {
		if err = os.Chmod(path, 0o600); err != nil {
			ln.Close()
		}
	}
	if err != nil {
		t.logEvent(slog.LevelDebug, "ucxnet: no stats socket", "err", err)
		return
	}
	s := &statsServer{ln: ln, path: path, sem: make(chan struct{}, maxStatsClients), done: make(chan struct{}),
		conns: make(map[*net.UnixConn]struct{})}
	t.statsSrv = s
	go s.serve(t)
}

// StatsSocket returns the path of the transport's stats socket, "" if it
// has none.
func (t *Transport) StatsSocket() string {
	if t.statsSrv == nil {
		return ""
	}
	return t.statsSrv.path
}

// close stops serving, removes the socket and ends the connections being
// answered: a client that sends nothing does not hold up Transport.Close.
func (s *statsServer) close() {
	if s == nil {
		return
	}
	s.ln.Close() // unlinks the socket
	<-s.done     // no connection is added after this
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *statsServer) serve(t *Transport) {
	defer close(s.done)
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like: don't spin
			continue
		}
		select {
		case s.sem <- struct{}{}:
			s.wg.Add(1)
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			go func() {
				defer s.wg.Done()
				defer func() { <-s.sem }()
				s.answer(t, c)
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
			}()
		default:
			c.Close() // too many at once
		}
	}
}

// answer serves one connection: only this user's (or root's) request line
// gets the snapshot.
func (s *statsServer) answer(t *Transport, c *net.UnixConn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(statsTimeout))
	if uid, _, err := peerCred(c); err != nil || uid != os.Geteuid() && uid != 0 {
		return
	}
	line, err := bufio.NewReaderSize(c, 64).ReadString('\n')
	if err != nil || line != StatsRequest {
		_, _ = fmt.Fprintf(c, "{\"error\":%q}\n", "want "+strings.TrimSpace(StatsRequest))
		return
	}
	_ = json.NewEncoder(c).Encode(t.Snapshot())
}

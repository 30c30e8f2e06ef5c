package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/ucxnet/ucxnet/registry"
	"github.com/ucxnet/ucxnet/ucxnet"
)

var lsCmd = &command{
	Name:  "ls",
	Short: "list the live conns and listeners of this user's processes (alias: ss)",
	Long: `Ls asks every ucxnet transport of this user's processes for its listeners
and conns, over the stats socket each serves (see UCXNET_STATS_DIR), and
prints them per process: each conn's lane and why it is on it, its UCX
transports, bytes each way, state, age and round trip. With --json it
prints the transports' snapshots as a JSON array. On the way it removes the
stats sockets of processes that are gone and the stale entries of the
directory registry (UCXNET_REGISTRY). Answers are not trusted: each is
read with a timeout and a size limit, from a socket of this user only.`,
	Setup: setupLs,
}

// ssCmd is ls under the name users of ss(8) type.
var ssCmd = &command{Name: "ss", Short: lsCmd.Short, Long: lsCmd.Long, Hidden: true, Setup: setupLs}

// maxStatsAnswer bounds a stats socket's answer.
const maxStatsAnswer = 16 << 20

func setupLs(fs *flag.FlagSet) func(context.Context, *stdio, []string) error {
	var asJSON bool
	var dir string
	var timeout time.Duration
	fs.BoolVar(&asJSON, "json", false, "print the snapshots as JSON")
	fs.StringVar(&dir, "dir", "", "the stats `directory` (default: $UCXNET_STATS_DIR, else .stats in the registry directory)")
	fs.DurationVar(&timeout, "timeout", 2*time.Second, "how long each process may take to answer")
	return func(ctx context.Context, sio *stdio, args []string) error {
		if len(args) != 0 {
			return usagef("ls takes no arguments")
		}
		if timeout <= 0 {
			return usagef("--timeout must be positive")
		}
		return runLs(ctx, sio, dir, asJSON, timeout)
	}
}

// lsResult is what one stats socket gave.
type lsResult struct {
	path string
	pid  int
	snap ucxnet.Snapshot
	err  error
}

func runLs(ctx context.Context, sio *stdio, dir string, asJSON bool, timeout time.Duration) error {
	if dir == "" {
		d, err := ucxnet.StatsDir("")
		if err != nil {
			return err
		}
		if d == "" {
			return fmt.Errorf("stats sockets are off (%s=%s): nothing to ask", ucxnet.EnvStatsDir, ucxnet.StatsOff)
		}
		dir = d
	}
	pruneRegistry(ctx, sio.Err)
	res, err := queryStatsDir(ctx, dir, timeout, sio.Err)
	if err != nil {
		return err
	}
	var snaps []ucxnet.Snapshot
	failed := 0
	for _, r := range res {
		if r.err != nil {
			failed++
			fmt.Fprintf(sio.Err, "ucxnet: ls: %s (pid %d): %v\n", r.path, r.pid, r.err)
			continue
		}
		snaps = append(snaps, r.snap)
	}
	if asJSON {
		if snaps == nil {
			snaps = []ucxnet.Snapshot{}
		}
		enc := json.NewEncoder(sio.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(snaps); err != nil {
			return err
		}
	} else {
		printSnapshots(sio.Out, snaps)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d stats sockets gave no usable answer", failed, len(res))
	}
	return nil
}

// pruneRegistry removes the stale entries of the directory registry the
// environment selects, saying so on w.
func pruneRegistry(ctx context.Context, w io.Writer) {
	reg, err := registry.FromEnv()
	if err != nil {
		return
	}
	defer func() {
		if c, ok := reg.(io.Closer); ok {
			c.Close()
		}
	}()
	d, ok := reg.(*registry.Dir)
	if !ok {
		return
	}
	removed, err := d.Prune(ctx)
	for _, r := range removed {
		fmt.Fprintf(w, "ucxnet: ls: removed stale registry entry %s\n", sanitize(r, 200))
	}
	if err != nil {
		fmt.Fprintf(w, "ucxnet: ls: pruning %s: %v\n", d, err)
	}
}

// queryStatsDir asks every stats socket in dir, oldest process first.
// Sockets of processes that are gone are removed; notes go to w.
func queryStatsDir(ctx context.Context, dir string, timeout time.Duration, w io.Writer) ([]lsResult, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []lsResult
	gone := 0
	for _, de := range des {
		name := de.Name()
		pidStr, _, ok := strings.Cut(name, "-")
		pid, perr := strconv.Atoi(pidStr)
		if !ok || perr != nil || pid <= 0 || !strings.HasSuffix(name, ucxnet.StatsSocketSuffix) || de.Type() != os.ModeSocket {
			continue
		}
		path := filepath.Join(dir, name)
		snap, err := queryStats(ctx, path, pid, timeout)
		switch {
		case err != nil && staleSocket(path, pid, err):
			if os.Remove(path) == nil {
				gone++
			}
			continue
		case errors.Is(err, syscall.ECONNREFUSED):
			continue // a fresh socket between its bind and its listen: not there yet
		}
		if err == nil {
			pid = snap.PID
		}
		out = append(out, lsResult{path: path, pid: pid, snap: snap, err: err})
	}
	if gone > 0 {
		fmt.Fprintf(w, "ucxnet: ls: removed %d stats sockets of processes that are gone\n", gone)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out, nil
}

// staleSocket reports whether the stats socket at path, named for pid,
// whose query failed with err, is left over from a process that is gone:
// nothing listens on it (ECONNREFUSED), and no process has pid or it was
// made more than a second ago (a socket refuses between its bind and its
// listen, for microseconds). A socket that answered slowly or not at all
// is not stale. A process in another pid namespace names its socket with
// a pid of that namespace: a pid missing here alone proves nothing, and a
// refused socket of a live pid can be stale.
func staleSocket(path string, pid int, err error) bool {
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return false
	}
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	fi, serr := os.Lstat(path)
	return serr == nil && time.Since(fi.ModTime()) > time.Second
}

// queryStats asks the stats socket at path, named for pid, for its
// snapshot. The answer is untrusted: the server must be this user's, the
// answer at most maxStatsAnswer bytes of JSON naming pid. The snapshot's
// PID is then the server's pid as this process sees it (SO_PEERCRED).
func queryStats(ctx context.Context, path string, pid int, timeout time.Duration) (ucxnet.Snapshot, error) {
	var snap ucxnet.Snapshot
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return snap, err
	}
	c := nc.(*net.UnixConn)
	defer c.Close()
	dl, _ := ctx.Deadline()
	_ = c.SetDeadline(dl)
	uid, cpid, err := ucxnet.PeerCred(c)
	switch {
	case err != nil:
		return snap, fmt.Errorf("cannot tell who serves it: %v", err)
	case uid != os.Geteuid():
		return snap, fmt.Errorf("served by uid %d, not this user (uid %d): not asked", uid, os.Geteuid())
	}
	if _, err := io.WriteString(c, ucxnet.StatsRequest); err != nil {
		return snap, err
	}
	data, err := io.ReadAll(io.LimitReader(c, maxStatsAnswer+1))
	if err != nil {
		return snap, fmt.Errorf("reading the answer: %v", err)
	}
	if len(data) > maxStatsAnswer {
		return snap, fmt.Errorf("answer larger than %d MiB: not read", maxStatsAnswer>>20)
	}
	if err := json.Unmarshal(data, &snap); err != nil {
		return snap, fmt.Errorf("not a stats answer (%d bytes): %v", len(data), err)
	}
	if snap.PID != pid || snap.Transport == "" {
		return snap, fmt.Errorf("not a stats answer: pid %d, transport %q", snap.PID, sanitize(snap.Transport, 64))
	}
	// The pids are the server's own; the kernel's is the one in this
	// pid namespace (they differ for a process in a container).
	snap.PID = cpid
	return snap, nil
}

// printSnapshots prints snaps as a table per transport.
func printSnapshots(w io.Writer, snaps []ucxnet.Snapshot) {
	if len(snaps) == 0 {
		fmt.Fprintln(w, "no ucxnet transports of this user are running (or their stats sockets are off)")
		return
	}
	for i, s := range snaps {
		if i > 0 {
			fmt.Fprintln(w)
		}
		ls := make([]string, len(s.Listeners))
		for i, l := range s.Listeners {
			ls[i] = sanitize(l, 64)
		}
		listens := strings.Join(ls, " ")
		if listens == "" {
			listens = "-"
		}
		fmt.Fprintf(w, "pid %d %s  transport %s  listens %s  conns %d\n", s.PID, sanitize(s.Program, 64), sanitize(s.Transport, 64), listens, len(s.Conns)+s.ConnsOmitted)
		if len(s.Conns) == 0 {
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  LANE\tSTATE\tLOCAL\tREMOTE\tTRANSPORTS\tIN\tOUT\tAGE\tRTT\tWHY")
		for _, c := range s.Conns {
			ts := make([]string, len(c.Transports))
			for i, t := range c.Transports {
				ts[i] = sanitize(t, 40)
			}
			rtt := "-"
			if c.RTT > 0 {
				rtt = c.RTT.Round(time.Microsecond).String()
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
				sanitize(c.Lane, 8), sanitize(c.State, 16), sanitize(c.Local, 80), sanitize(c.Remote, 80),
				strings.Join(ts, ","), fmtBytes(c.BytesIn), fmtBytes(c.BytesOut),
				c.Age.Round(100*time.Millisecond), rtt, sanitize(c.LaneReason, 80))
		}
		tw.Flush()
		if s.ConnsOmitted > 0 {
			fmt.Fprintf(w, "  (%d more conns not listed)\n", s.ConnsOmitted)
		}
	}
}

// fmtBytes prints n bytes in B, KiB, MiB or GiB.
func fmtBytes(n uint64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%dB", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
}

// sanitize makes an untrusted string safe to print: no control or
// non-printable characters (each becomes '?'), no tabs or newlines, at
// most max runes (then "…").
func sanitize(s string, max int) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == max {
			b.WriteString("…")
			break
		}
		if !unicode.IsPrint(r) || r == '\t' {
			r = '?'
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

//go:build linux

package session

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ucxnet/ucxnet/registry"
)

// execWindowRounds is how many dials (and accepts) exec a child at once.
const execWindowRounds = 8

// TestExecRightAfterDialAndAccept: a child exec'd the moment a new
// transport's Dial returns, or the moment Accept returns, inherits none of
// the descriptors UCX had made by then (sockets, epoll, eventfd and
// timerfd instances). Each round starts a new dialing transport, as the
// window is widest while a worker and its first endpoints wire up. The
// child (ls) lists its descriptors; one that was a socket or an anon inode
// in this process before the call began, and still lacked close-on-exec
// when it returned, is a failure: the call's sweep had to mark it. The
// two transports run in this process, so while one call returns the
// other's UCX makes descriptors of its own (its async thread accepting
// the other's tcp connection, its wireup): those, and any made after the
// call began, are counted and logged, since no sweep in the call can be
// sure to reach them before a fork that races them.
func TestExecRightAfterDialAndAccept(t *testing.T) {
	needUCX(t)
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc/self/fd to see which descriptors a child inherits:", err)
	}
	if _, err := exec.LookPath("ls"); err != nil {
		t.Skip("needs ls(1) to exec:", err)
	}
	if os.Getenv(EnvNoCloexec) == "1" {
		t.Skip(EnvNoCloexec + "=1 turns the sweep off")
	}
	reg, err := registry.NewDir(t.TempDir())
	require.NoError(t, err)
	lt, err := newUCXTransport(Config{Registry: reg, Lane: LaneUCX})
	require.NoError(t, err)
	defer lt.Close()
	ln, err := (&ListenConfig{Transport: lt}).Listen(context.Background(), "execwin")
	require.NoError(t, err)
	defer ln.Close()

	var held, late int
	for round := range execWindowRounds {
		accepted := make(chan execWindow, 1)
		acceptPre := fdLinksOf(os.Getpid())
		go func() {
			c, err := ln.AcceptStream(nil)
			if err != nil {
				accepted <- execWindow{err: err}
				return
			}
			w := execAt()
			w.conn, w.pre = c, acceptPre
			accepted <- w
		}()
		dt, err := newUCXTransport(Config{Registry: reg, Lane: LaneUCX})
		require.NoError(t, err)
		dialPre := fdLinksOf(os.Getpid())
		c, err := (&Dialer{Transport: dt, Timeout: 10 * time.Second}).DialStream(context.Background(), "execwin")
		require.NoError(t, err)
		dw := execAt()
		dw.pre = dialPre
		aw := <-accepted
		require.NoError(t, aw.err)
		for _, w := range []struct {
			side string
			execWindow
		}{{"dial", dw}, {"accept", aw}} {
			h, l := w.inherited(t)
			held += len(h)
			late += len(l)
			require.Empty(t, h, "round %d: the child exec'd when %s returned inherited what UCX had made before it began", round, w.side)
			if len(l) > 0 {
				t.Logf("round %d: the child exec'd when %s returned inherited %v, made after it returned", round, w.side, l)
			}
		}
		c.Close()
		aw.conn.Close()
		require.NoError(t, dt.Close())
	}
	t.Logf("%d rounds (%s): children inherited %d descriptors that existed when the call returned, %d made after",
		execWindowRounds, os.Getenv("UCX_TLS"), held, late)
}

// TestExecWindowDelays measures (with UCXNET_EXEC_WINDOW=measure; it is
// slow) how many children exec'd 0 to 400 ms after a new transport's Dial
// returned, its conn carrying an echoed byte, inherit a descriptor of UCX:
// one that existed when the child was forked fails the test, as in
// TestExecRightAfterDialAndAccept; the counts per delay are logged.
func TestExecWindowDelays(t *testing.T) {
	needUCX(t)
	if os.Getenv("UCXNET_EXEC_WINDOW") != "measure" {
		t.Skip("a measurement: runs with UCXNET_EXEC_WINDOW=measure")
	}
	reg, err := registry.NewDir(t.TempDir())
	require.NoError(t, err)
	lt, err := newUCXTransport(Config{Registry: reg, Lane: LaneUCX})
	require.NoError(t, err)
	defer lt.Close()
	ln, err := (&ListenConfig{Transport: lt}).Listen(context.Background(), "execwin")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			s, err := ln.AcceptStream(nil)
			if err != nil {
				return
			}
			go func() { c := wrap(s); io.Copy(c, c); c.Close() }()
		}
	}()
	const rounds = 10
	delays := []time.Duration{0, 5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
		100 * time.Millisecond, 150 * time.Millisecond, 400 * time.Millisecond}
	for _, d := range delays {
		inherited := 0
		for range rounds {
			dt, err := newUCXTransport(Config{Registry: reg, Lane: LaneUCX})
			require.NoError(t, err)
			c, err := (&Dialer{Transport: dt, Timeout: 10 * time.Second}).Dial(Network, "execwin")
			require.NoError(t, err)
			_, err = c.Write([]byte("x"))
			require.NoError(t, err)
			_, err = io.ReadFull(c, make([]byte, 1))
			require.NoError(t, err)
			time.Sleep(d)
			h, l := execAt().inherited(t)
			require.Empty(t, h, "a child exec'd %v after Dial inherited what UCX had made by its fork", d)
			if len(l) > 0 {
				inherited++
			}
			c.Close()
			require.NoError(t, dt.Close())
		}
		t.Logf("%s: children exec'd %v after Dial: %d of %d inherited a descriptor of UCX", os.Getenv("UCX_TLS"), d, inherited, rounds)
	}
}

// execWindow is a child exec'd right after a call returned: the
// inheritable descriptors this process had just before the fork, and the
// child's.
type execWindow struct {
	before map[int]string // this process's, lacking close-on-exec
	pre    map[int]string // nil, or every descriptor of this process before the call began
	cmd    *exec.Cmd
	out    *strings.Builder
	conn   Stream
	err    error
}

// execAt notes this process's inheritable descriptors and starts ls on its
// own /proc/self/fd.
func execAt() execWindow {
	w := execWindow{before: make(map[int]string), out: new(strings.Builder)}
	for _, fd := range inheritableFDs() {
		w.before[fd] = fdLinkOf(fd)
	}
	w.cmd = exec.Command("ls", "-l", "/proc/self/fd/")
	w.cmd.Stdout = w.out
	if err := w.cmd.Start(); err != nil {
		w.err = err
	}
	return w
}

// inherited waits for w's child and returns the sockets and anon inodes it
// holds above stderr: held, those this process had without close-on-exec
// just before the fork (and, with w.pre, before the call began), and
// late, the others.
func (w execWindow) inherited(t *testing.T) (held, late []string) {
	t.Helper()
	require.NoError(t, w.err)
	require.NoError(t, w.cmd.Wait())
	for _, line := range strings.Split(w.out.String(), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[len(f)-2] != "->" {
			continue
		}
		fd, err := strconv.Atoi(f[len(f)-3])
		link := f[len(f)-1]
		if err != nil || fd <= 2 || !strings.HasPrefix(link, "socket:") && !strings.HasPrefix(link, "anon_inode:") {
			continue
		}
		desc := strconv.Itoa(fd) + " (" + link + ")"
		if w.before[fd] == link && (w.pre == nil || w.pre[fd] == link) {
			held = append(held, desc)
		} else {
			late = append(late, desc)
		}
	}
	return held, late
}

// fdLinkOf returns what this process's descriptor fd links to.
func fdLinkOf(fd int) string {
	var buf [64]byte
	n, err := unix.Readlink("/proc/self/fd/"+strconv.Itoa(fd), buf[:])
	if err != nil {
		return ""
	}
	return string(buf[:n])
}

// TestExecAfterStrayConnectInheritsNoUCXSocket: anyone who connects to the
// tcp port UCX listens on gets a socket accepted by UCX's async thread,
// without close-on-exec and without a word that ucxnet would see. The idle
// ticks' sweep marks it (about once a second): a child exec'd after that
// holds none of them. Without the idle sweep they stayed inheritable for
// as long as the stranger's connection lived, and this waits out its 20 s
// bound.
func TestExecAfterStrayConnectInheritsNoUCXSocket(t *testing.T) {
	needUCX(t)
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("needs /proc/net/tcp to find UCX's tcp port:", err)
	}
	if os.Getenv(EnvNoCloexec) == "1" {
		t.Skip(EnvNoCloexec + "=1 turns the sweep off")
	}
	reg, err := registry.NewDir(t.TempDir())
	require.NoError(t, err)
	tr, err := newUCXTransport(Config{Registry: reg, Lane: LaneUCX})
	require.NoError(t, err)
	defer tr.Close()
	ports := listeningTCP(t)
	if len(ports) == 0 {
		t.Skip("UCX listens on no tcp port (UCX_TLS without tcp)")
	}
	// Past the second of ticks that the worker's creation asked for, so
	// that only the idle sweep is left to mark the stranger's sockets.
	time.Sleep(1500 * time.Millisecond)
	sockets := func() int {
		n := 0
		for _, l := range fdLinksOf(os.Getpid()) {
			if strings.HasPrefix(l, "socket:") {
				n++
			}
		}
		return n
	}
	before := sockets()
	for _, ap := range ports {
		c, err := net.Dial("tcp", ap.String())
		require.NoError(t, err)
		defer c.Close()
	}
	// Our end of each connection, and UCX's, once its async thread has
	// accepted them (it may not have when Dial returns).
	require.Eventually(t, func() bool { return sockets() >= before+2*len(ports) }, 20*time.Second, time.Millisecond,
		"UCX did not accept the connections")
	start := time.Now()
	seen := len(inheritableFDs())
	for end := start.Add(20 * time.Second); time.Now().Before(end) && len(inheritableFDs()) > 0; {
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("connected to %d ports; %d descriptors lacked close-on-exec right after, none after %v", len(ports), seen, time.Since(start))
	w := execAt()
	h, l := w.inherited(t)
	require.Empty(t, append(h, l...), "the child inherited UCX's sockets")
}

// listeningTCP returns the IPv4 addresses this process's sockets listen on
// (from /proc/net/tcp), as a stranger would connect to them.
func listeningTCP(t *testing.T) []netip.AddrPort {
	t.Helper()
	inodes := make(map[string]bool)
	for _, l := range fdLinksOf(os.Getpid()) {
		if ino, ok := strings.CutPrefix(l, "socket:["); ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	data, err := os.ReadFile("/proc/net/tcp")
	require.NoError(t, err)
	var out []netip.AddrPort
	for _, line := range strings.Split(string(data), "\n") {
		// sl local rem st queues timer retr uid timeout inode
		f := strings.Fields(line)
		if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
			continue
		}
		host, port, _ := strings.Cut(f[1], ":")
		ip, err1 := hex.DecodeString(host)
		p, err2 := strconv.ParseUint(port, 16, 16)
		if err1 != nil || err2 != nil || len(ip) != 4 {
			continue
		}
		addr := netip.AddrFrom4([4]byte{ip[3], ip[2], ip[1], ip[0]}) // host order
		if addr.IsUnspecified() {
			addr = netip.AddrFrom4([4]byte{127, 0, 0, 1})
		}
		out = append(out, netip.AddrPortFrom(addr, uint16(p)))
	}
	return out
}

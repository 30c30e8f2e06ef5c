//go:build linux

package session

import (
	"context"
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
// in this process, lacking close-on-exec, when the call returned is a
// failure. Descriptors UCX makes after the call returned (its async
// thread, an endpoint wired up lazily) are counted and logged: no sweep
// can reach those before a fork that races them.
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
		go func() {
			c, err := ln.AcceptStream()
			if err != nil {
				accepted <- execWindow{err: err}
				return
			}
			w := execAt()
			w.conn = c
			accepted <- w
		}()
		dt, err := newUCXTransport(Config{Registry: reg, Lane: LaneUCX})
		require.NoError(t, err)
		c, err := (&Dialer{Transport: dt, Timeout: 10 * time.Second}).DialStream(context.Background(), "execwin")
		require.NoError(t, err)
		dw := execAt()
		aw := <-accepted
		require.NoError(t, aw.err)
		for _, w := range []struct {
			side string
			execWindow
		}{{"dial", dw}, {"accept", aw}} {
			h, l := w.inherited(t)
			held += len(h)
			late += len(l)
			require.Empty(t, h, "round %d: the child exec'd when %s returned inherited what UCX had made by then", round, w.side)
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

// execWindow is a child exec'd right after a call returned: the
// inheritable descriptors this process had just before the fork, and the
// child's.
type execWindow struct {
	before map[int]string // this process's, lacking close-on-exec
	cmd    *exec.Cmd
	out    *strings.Builder
	conn   *Conn
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
// just before the fork, and late, the others (made after the call
// returned).
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
		if w.before[fd] == link {
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

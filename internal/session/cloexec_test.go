//go:build linux

package session

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ucxnet/ucxnet/registry"
)

// Environment of the exec-child helper.
const (
	execChildEnv = "UCXNET_TEST_EXEC_CHILD"
)

// TestHelperExecChild is not a test: it is the peer of
// TestExecChildHoldsNoUCXSockets, run in a child process. It accepts one
// conn, echoes a byte, execs a long-lived child (sleep) as an application
// might, says its pid, and echoes.
func TestHelperExecChild(t *testing.T) {
	name := os.Getenv(execChildEnv)
	if name == "" {
		t.Skip("helper process for TestExecChildHoldsNoUCXSockets; runs only as its child")
	}
	ln, err := Listen(Network, name)
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	fmt.Println("ready", ln.Addr())
	c, err := ln.Accept()
	if err != nil {
		fmt.Println("accept:", err)
		os.Exit(1)
	}
	// Like an application that execs children once its conns are up: after
	// a round trip, and once no socket, epoll, eventfd or timerfd lacks
	// close-on-exec (the sweeps mark what UCX makes while it wires the
	// endpoint up; without them this waits out its 20 s bound).
	if _, err := io.CopyN(c, c, 1); err != nil {
		fmt.Println("echo:", err)
		os.Exit(1)
	}
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end) && len(inheritableFDs()) > 0; {
		time.Sleep(10 * time.Millisecond)
	}
	sleep := exec.Command("sleep", "600")
	if err := sleep.Start(); err != nil {
		fmt.Println("exec:", err)
		os.Exit(1)
	}
	fmt.Println("sleep", sleep.Process.Pid)
	io.Copy(c, c)
	select {}
}

// TestExecChildHoldsNoUCXSockets: a process with a conn over UCX's tcp
// execs a long-lived child, then dies. The child must hold none of the
// dead process's UCX sockets, epoll or timer descriptors; holding them kept
// the connection open, so that the survivor learnt of the death only from
// ucxnet's keepalive (about 1.3 s), and with keepalive off (as here) never:
// its Read waited out the 30 s guard. Now the kernel closes the socket and
// the Read fails with ECONNRESET.
func TestExecChildHoldsNoUCXSockets(t *testing.T) {
	needUCX(t)
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("needs sleep(1) to exec:", err)
	}
	if os.Getenv(EnvNoCloexec) == "1" {
		t.Skip(EnvNoCloexec + "=1 turns the sweep off")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperExecChild$", "-test.v=false")
	cmd.Env = append(os.Environ(), execChildEnv+"=execer", "UCXNET_REGISTRY=dir:"+dir,
		"UCX_TLS=tcp", EnvLane+"="+LaneUCX, "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var sleepPid int
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if sleepPid > 0 {
			syscall.Kill(sleepPid, syscall.SIGKILL) // the test's grandchild; init reaps it
		}
	})
	lines := bufio.NewReader(out)
	line, err := lines.ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "ready"), "child said %q", line)

	reg, err := registry.NewDir(dir)
	require.NoError(t, err)
	tr, err := newUCXTransport(Config{Registry: reg, UCX: map[string]string{"TLS": "tcp"}, Lane: LaneUCX, KeepAlive: -1})
	require.NoError(t, err)
	defer tr.Close()
	d := Dialer{Transport: tr, Timeout: 10 * time.Second}
	c, err := d.Dial(Network, "execer")
	require.NoError(t, err)
	defer c.Close()

	_, err = c.Write([]byte("x"))
	require.NoError(t, err)
	_, err = io.ReadFull(c, make([]byte, 1))
	require.NoError(t, err)
	line, err = lines.ReadString('\n')
	require.NoError(t, err)
	_, err = fmt.Sscanf(line, "sleep %d", &sleepPid)
	require.NoError(t, err, "child said %q", line)
	tl := c.(*testConn).Transports()
	require.True(t, len(tl) > 0 && onlyTransports(tl, "tcp"), "the conn must ride on UCX's tcp, not %v", tl)

	var ucxFDs int
	for _, l := range fdLinks(t, cmd.Process.Pid) {
		if strings.HasPrefix(l, "socket:") || strings.HasPrefix(l, "anon_inode:") {
			ucxFDs++
		}
	}
	require.NotZero(t, ucxFDs, "the child holds no sockets?")
	for fd, l := range fdLinks(t, sleepPid) {
		// sleep opens none of these itself: each would be its parent's.
		require.False(t, strings.HasPrefix(l, "socket:") || strings.HasPrefix(l, "anon_inode:"),
			"the exec'd child inherited fd %d (%s)", fd, l)
	}

	require.NoError(t, cmd.Process.Kill())
	cmd.Wait()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second))) // a hang guard
	_, err = c.Read(make([]byte, 1))
	require.ErrorIs(t, err, syscall.ECONNRESET, "the peer's death must reach us with keepalive off: only the kernel closing its socket tells")
	requireCarriesOn(t, tr, c)
}

// inheritableFDs lists this process's descriptors above 2 that lack
// close-on-exec and are of a kind the sweeps mark: sockets and epoll,
// eventfd and timerfd instances.
func inheritableFDs() []int {
	var fds []int
	for fd, l := range fdLinksOf(os.Getpid()) {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if fd <= 2 || err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue
		}
		switch {
		case strings.HasPrefix(l, "socket:"), l == "anon_inode:[eventpoll]",
			l == "anon_inode:[eventfd]", l == "anon_inode:[timerfd]":
			fds = append(fds, fd)
		}
	}
	return fds
}

// fdLinks returns what each of process pid's descriptors links to.
func fdLinks(t *testing.T, pid int) map[int]string {
	t.Helper()
	links := fdLinksOf(pid)
	require.NotEmpty(t, links, "reading /proc/%d/fd", pid)
	return links
}

// fdLinksOf returns what each of process pid's descriptors links to, or
// nothing when /proc cannot tell.
func fdLinksOf(pid int) map[int]string {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, _ := os.ReadDir(dir)
	links := make(map[int]string, len(ents))
	for _, e := range ents {
		fd, _ := strconv.Atoi(e.Name())
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
			links[fd] = l
		}
	}
	return links
}

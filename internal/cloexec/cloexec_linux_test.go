package cloexec

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestMarkCloexecKinds: a sweep marks sockets and epoll, eventfd and
// timerfd instances that lack close-on-exec (as UCX creates them), and
// leaves pipes and files alone (an application may mean a child to
// inherit those).
func TestMarkCloexecKinds(t *testing.T) {
	sock, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	require.NoError(t, err)
	ep, err := unix.EpollCreate(1)
	require.NoError(t, err)
	ev, err := unix.Eventfd(0, 0)
	require.NoError(t, err)
	tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, 0)
	require.NoError(t, err)
	var pipe [2]int
	require.NoError(t, unix.Pipe(pipe[:]))
	file, err := unix.Open(os.DevNull, unix.O_RDONLY, 0)
	require.NoError(t, err)
	all := []int{sock, ep, ev, tfd, pipe[0], pipe[1], file}
	t.Cleanup(func() {
		for _, fd := range all {
			unix.Close(fd)
		}
	})
	for _, fd := range all {
		require.False(t, cloexec(t, fd), "fd %d starts without FD_CLOEXEC", fd)
	}

	require.GreaterOrEqual(t, markCloexec(make([]byte, 4096)), 4)
	for _, fd := range []int{sock, ep, ev, tfd} {
		require.True(t, cloexec(t, fd), "%s not marked", fdLink(fd))
	}
	for _, fd := range []int{pipe[0], pipe[1], file} {
		require.False(t, cloexec(t, fd), "%s marked", fdLink(fd))
	}
	require.Zero(t, markCloexec(make([]byte, 4096)), "a second sweep finds nothing")
}

// TestSweeperRequest: a Request sweeps at once, and a Sweeper made off
// never does.
func TestSweeperRequest(t *testing.T) {
	sock, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(sock) })

	New(true).Request()
	require.False(t, cloexec(t, sock), "a Sweeper made off marked %s", fdLink(sock))
	New(false).Request()
	require.True(t, cloexec(t, sock), "a Request did not mark %s", fdLink(sock))
}

// TestSweeperSweep: a Sweep marks what was made since the last sweep
// however recent that was (a Request right after one may skip it).
func TestSweeperSweep(t *testing.T) {
	s := New(false)
	s.Request()
	sock, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(sock) })
	s.Sweep()
	require.True(t, cloexec(t, sock), "a Sweep right after a sweep did not mark %s", fdLink(sock))

	New(true).Sweep() // a Sweeper made off does nothing
}

// TestSweeperTickIdle: with no Request for a second, a Tick still sweeps,
// for the descriptors UCX makes on its own (a stranger's tcp connection
// that its async thread accepted).
func TestSweeperTickIdle(t *testing.T) {
	s := New(false)
	sock, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(sock) })
	s.Tick(time.Now())
	require.True(t, cloexec(t, sock), "an idle Tick did not mark %s", fdLink(sock))
}

// BenchmarkSweep100 measures a Sweep in a process holding 100 more
// sockets, all close-on-exec already: what Dial and Accept add.
func BenchmarkSweep100(b *testing.B) {
	for range 100 {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer unix.Close(fd)
	}
	s := New(false)
	for b.Loop() {
		s.Sweep()
	}
}

func cloexec(t *testing.T, fd int) bool {
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	require.NoError(t, err)
	return flags&unix.FD_CLOEXEC != 0
}

func fdLink(fd int) string {
	l, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	return fmt.Sprintf("fd %d (%s)", fd, l)
}

// BenchmarkMarkCloexec10k measures one sweep of a process holding 10,000
// more sockets, all close-on-exec already (Go's): its steady state.
func BenchmarkMarkCloexec10k(b *testing.B) {
	for range 10000 {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer unix.Close(fd)
	}
	buf := make([]byte, 16<<10)
	b.ResetTimer()
	for b.Loop() {
		markCloexec(buf)
	}
}

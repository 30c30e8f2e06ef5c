package progress

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// newEpollEventfd returns an epoll fd watching an eventfd, as UCX's event
// fd watches its transports', and the eventfd.
func newEpollEventfd(t *testing.T) (ep, ev int) {
	ev, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	require.NoError(t, err)
	ep, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(ep); unix.Close(ev) })
	require.NoError(t, unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, ev, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(ev)}))
	return ep, ev
}

func signalFD(t *testing.T, fd int) {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, err := unix.Write(fd, one[:])
	require.NoError(t, err)
}

func drainFD(fd int) {
	var b [8]byte
	unix.Read(fd, b[:])
}

// efdWait sleeps in the netpoller until the fd is readable or the timeout
// passes; an event that comes while arming is not lost; arming that finds
// work does not sleep; and closing it leaves the watched fd open.
func TestEFDWait(t *testing.T) {
	ep, ev := newEpollEventfd(t)
	w, err := newEFDWait(ep)
	require.NoError(t, err)

	// Timeout: slept, not ready.
	slept, ready, err := w.wait(func() time.Duration { return 20 * time.Millisecond })
	require.NoError(t, err)
	require.True(t, slept)
	require.False(t, ready, "woke without an event")

	// A wake from another goroutine (after the deadline of the last wait
	// passed: it must not fail the next one).
	go func() {
		time.Sleep(5 * time.Millisecond)
		signalFD(t, ev)
	}()
	slept, ready, err = w.wait(func() time.Duration { return time.Minute })
	require.NoError(t, err)
	require.True(t, slept)
	require.True(t, ready)
	drainFD(ev)

	// An event that comes while the worker is being armed wakes the wait
	// at once, though the netpoller saw the fd before.
	slept, ready, err = w.wait(func() time.Duration {
		signalFD(t, ev)
		return time.Minute
	})
	require.NoError(t, err)
	require.True(t, slept)
	require.True(t, ready)
	drainFD(ev)

	// Arming found work: no sleep.
	slept, ready, err = w.wait(func() time.Duration { return 0 })
	require.NoError(t, err)
	require.False(t, slept)
	require.False(t, ready)

	require.NoError(t, w.close())
	_, err = unix.FcntlInt(uintptr(ep), unix.F_GETFD, 0)
	require.NoError(t, err, "closing the waiter closed the fd it watched")
}

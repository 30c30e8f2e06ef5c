package ucxnet

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/engine/memengine"
	"github.com/ucxnet/ucxnet/registry"
)

// Listen takes the network "ucx" only, and refuses another one as
// net.Listen refuses "udp4x": a *net.OpError with a
// net.UnknownNetworkError, Net that network.
func TestListenRefusesOtherNetworks(t *testing.T) {
	tr := newMemTransport(t, memengine.NewNetwork(), Config{Registry: registry.NewMemory(), StatsDir: StatsOff})
	defer tr.Close()
	lc := ListenConfig{Transport: tr}
	for _, nw := range []string{"tcp", "tcp4", "tcp6", "udp", "unix", ""} {
		ln, err := lc.Listen(context.Background(), nw, "x")
		if ln != nil {
			ln.Close()
		}
		var op *net.OpError
		require.ErrorAs(t, err, &op, "network %q", nw)
		require.Equal(t, nw, op.Net)
		var unk net.UnknownNetworkError
		require.ErrorAs(t, err, &unk, "network %q", nw)
	}
}

// A name that reads as a TCP host:port is refused, saying what a name is;
// other names with a colon are names.
func TestListenRefusesHostPort(t *testing.T) {
	tr := newMemTransport(t, memengine.NewNetwork(), Config{Registry: registry.NewMemory(), StatsDir: StatsOff})
	defer tr.Close()
	lc := ListenConfig{Transport: tr}
	for _, name := range []string{"127.0.0.1:0", ":8080", ":0", "web:80", "[::1]:0", "host:"} {
		ln, err := lc.Listen(context.Background(), Network, name)
		if ln != nil {
			ln.Close()
		}
		var op *net.OpError
		require.ErrorAs(t, err, &op, "name %q", name)
		require.ErrorIs(t, err, registry.ErrInvalidName, "name %q", name)
		require.Contains(t, err.Error(), "registry name")
	}
	for _, name := range []string{"db/primary", "svc:a", "a:b:c"} {
		ln, err := lc.Listen(context.Background(), Network, name)
		require.NoError(t, err, name)
		ln.Close()
	}
}

// Listener.SetDeadline bounds Accept as (*net.TCPListener).SetDeadline
// does: a timeout matching os.ErrDeadlineExceeded, a blocked Accept
// interrupted by a deadline set later, no deadline after a zero one, and
// net.ErrClosed after Close.
func TestListenerSetDeadline(t *testing.T) {
	forEachEngine(t, Config{}, func(t *testing.T, p *pair) {
		ln := p.ln.(*Listener)
		require.NoError(t, ln.SetDeadline(time.Now().Add(20*time.Millisecond)))
		_, err := ln.Accept()
		requireTimeout(t, err)

		require.NoError(t, ln.SetDeadline(time.Time{}))
		accepted := make(chan error, 1)
		go func() {
			_, err := ln.Accept()
			accepted <- err
		}()
		select {
		case err := <-accepted:
			t.Fatalf("Accept returned with no deadline and no dial: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		require.NoError(t, ln.SetDeadline(time.Now().Add(-time.Second))) // interrupts it
		select {
		case err := <-accepted:
			requireTimeout(t, err)
		case <-time.After(20 * time.Second):
			t.Fatal("a deadline in the past did not interrupt Accept")
		}

		require.NoError(t, ln.SetDeadline(time.Time{}))
		c, s := p.conns(t) // accepts again
		c.Close()
		s.Close()
		require.NoError(t, ln.Close())
		require.ErrorIs(t, ln.SetDeadline(time.Now()), net.ErrClosed)
	})
}

func requireTimeout(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout())
	var op *net.OpError
	require.ErrorAs(t, err, &op)
	require.Equal(t, "accept", op.Op)
}

// On the kernel-TCP lane SyscallConn is the socket's, and SetNoDelay and
// the buffer sizes are its options.
func TestSyscallConnTCPLane(t *testing.T) {
	forEachEngine(t, Config{Lane: LaneTCP}, func(t *testing.T, p *pair) {
		c, s := p.conns(t)
		defer c.Close()
		defer s.Close()
		for _, conn := range []*Conn{c.(*Conn), s.(*Conn)} {
			rc, err := conn.SyscallConn()
			require.NoError(t, err)
			var typ int
			var serr error
			require.NoError(t, rc.Control(func(fd uintptr) {
				typ, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TYPE)
			}))
			require.NoError(t, serr)
			require.Equal(t, syscall.SOCK_STREAM, typ)
			require.NoError(t, conn.SetNoDelay(false))
			require.NoError(t, conn.SetReadBuffer(1<<16))
			require.NoError(t, conn.SetWriteBuffer(1<<16))
		}
	})
}

// On the UCX lane SyscallConn's Read gives a descriptor that tells what a
// Read would find, as a pool's health check reads it (go-redis's
// connCheck): nothing (EAGAIN) while the conn is idle, a byte when data
// waits, EOF once the peer closed; Control is unsupported.
func TestSyscallConnUCXLaneReadiness(t *testing.T) {
	forEachEngine(t, Config{Lane: LaneUCX}, func(t *testing.T, p *pair) {
		c, s := p.conns(t)
		defer c.Close()
		cc := c.(*Conn)
		if name, _ := cc.Lane(); name != LaneUCX {
			t.Skipf("the conn runs on lane %q", name)
		}
		rc, err := cc.SyscallConn()
		require.NoError(t, err)
		check := func() (n int, err error) {
			var pn int
			var perr error
			require.NoError(t, rc.Read(func(fd uintptr) bool {
				var b [1]byte
				// go-redis peeks (recv with MSG_PEEK), others read.
				pn, _, perr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
				n, err = syscall.Read(int(fd), b[:])
				return true
			}))
			require.Equal(t, n, pn, "peek and read disagree: %v, %v", perr, err)
			return n, err
		}
		n, err := check()
		require.ErrorIs(t, err, syscall.EAGAIN, "idle: n=%d", n)

		_, err = s.Write([]byte("x"))
		require.NoError(t, err)
		require.Eventually(t, func() bool { n, _ := check(); return n == 1 }, 20*time.Second, time.Millisecond)
		_, err = c.Read(make([]byte, 1))
		require.NoError(t, err)
		n, err = check()
		require.ErrorIs(t, err, syscall.EAGAIN, "drained: n=%d", n)

		s.Close()
		require.Eventually(t, func() bool { n, err := check(); return n == 0 && err == nil }, 20*time.Second, time.Millisecond,
			"the peer's close reads as EOF")
		require.True(t, errors.Is(rc.Control(func(uintptr) {}), errors.ErrUnsupported))
	})
}

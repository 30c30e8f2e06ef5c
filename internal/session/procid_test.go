//go:build linux

package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/ucxconf"
	"github.com/ucxnet/ucxnet/registry"
)

// TestStoppedPeerKept: a peer process stopped (SIGSTOP, as a debugger
// does) for longer than its whole keepalive timeout keeps its conn, which
// carries data both ways once it runs again: the kernel channel says its
// process lives. The same peer killed still fails the conn. On the
// kernel-TCP lane TCP keepalive is the kernel's, which answers for a
// stopped process.
func TestStoppedPeerKept(t *testing.T) {
	for _, lane := range []string{LaneUCX, LaneTCP} {
		t.Run(lane, func(t *testing.T) {
			if lane == LaneUCX {
				needUCX(t)
			}
			if lane == LaneTCP && !ucxconf.TCPEnabled(os.Getenv("UCX_TLS")) {
				t.Skipf("UCX_TLS=%q: a listener opens no TCP port", os.Getenv("UCX_TLS"))
			}
			dir := t.TempDir()
			child := startChild(t, dir, "stoppable")
			reg, err := registry.NewDir(dir)
			require.NoError(t, err)
			// A whole keepalive timeout (idle and 9 probes) in 2 s.
			const ka = 200 * time.Millisecond
			tr, err := newUCXTransport(Config{Registry: reg, KeepAlive: ka, Lane: lane})
			require.NoError(t, err)
			defer tr.Close()
			d := Dialer{Transport: tr, Timeout: 10 * time.Second}
			c, err := d.Dial(Network, "stoppable")
			require.NoError(t, err)
			defer c.Close()
			if got, _ := c.(*testConn).Lane(); got != lane {
				t.Skipf("the conn took the %s lane, not %s (UCX_TLS=%q)", got, lane, os.Getenv("UCX_TLS"))
			}
			roundTrip(t, c, "before")

			require.NoError(t, child.Process.Signal(syscall.SIGSTOP))
			stopped := time.Now()
			if lane == LaneUCX {
				// Keepalive would have failed it twice over (a condition,
				// not a timing: 30 s only bounds a hang).
				require.Eventually(t, func() bool { return tr.Stats().KeepAliveKernel >= 2 }, 30*time.Second, time.Millisecond,
					"keepalive never judged the stopped peer")
			} else {
				time.Sleep(keepAliveOf(ka).Timeout()*2 - time.Since(stopped)) // stopped for two whole keepalive timeouts
			}
			require.NoError(t, child.Process.Signal(syscall.SIGCONT))
			require.Zero(t, tr.Stats().KeepAliveFailures, "keepalive took the stopped peer for dead")
			for range 10 {
				roundTrip(t, c, "after")
			}

			require.NoError(t, child.Process.Kill())
			child.Wait()
			require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second))) // a hang guard
			_, err = c.Read(make([]byte, 1))
			if lane == LaneTCP {
				require.ErrorIs(t, err, io.EOF, "a dead kernel-TCP peer gives EOF, as a *net.TCPConn does")
			} else {
				require.ErrorIs(t, err, syscall.ECONNRESET)
				var op *net.OpError
				require.True(t, errors.As(err, &op), "%T", err)
			}
			requireCarriesOn(t, tr, c)
		})
	}
}

// roundTrip writes a message and reads the echo of it back.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second))) // a hang guard
	_, err := c.Write([]byte(msg))
	require.NoError(t, err)
	got := make([]byte, len(msg))
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	require.Equal(t, msg, string(got))
	require.NoError(t, c.SetDeadline(time.Time{}))
}

// requireCarriesOn requires tr, after the peer behind dead died, to keep
// no conn once dead is closed, and to still make new conns: a listener of
// its own takes a dial that carries a round trip.
func requireCarriesOn(t *testing.T, tr *Transport, dead net.Conn) {
	t.Helper()
	dead.Close()
	require.Eventually(t, func() bool { return len(tr.Conns()) == 0 }, 20*time.Second, 10*time.Millisecond,
		"conns left after the peer died")
	name := fmt.Sprintf("carries-on-%d", os.Getpid())
	ln, err := (&ListenConfig{Transport: tr}).Listen(context.Background(), name)
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		if s, err := ln.Accept(); err == nil {
			io.Copy(s, s)
			s.Close()
		}
	}()
	c, err := (&Dialer{Transport: tr, Timeout: 10 * time.Second}).Dial(Network, name)
	require.NoError(t, err, "a new conn after the peer died")
	defer c.Close()
	roundTrip(t, c, "a new conn")
}

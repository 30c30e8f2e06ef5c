//go:build linux

package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/procstat"
	"github.com/ucxnet/ucxnet/internal/stream"
	"github.com/ucxnet/ucxnet/internal/ucxconf"
	"github.com/ucxnet/ucxnet/registry"
)

// sleepingChild starts `sleep 60`, killed when t ends, and returns it with
// the identity its Hello would carry.
func sleepingChild(t *testing.T) (*exec.Cmd, stream.ProcID) {
	t.Helper()
	self := procstat.Self()
	require.NotZero(t, self.PID, "this process has no identity")
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip("needs sleep(1):", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	st, err := procstat.Read(cmd.Process.Pid)
	require.NoError(t, err)
	return cmd, stream.ProcID{PID: uint32(cmd.Process.Pid), Start: st.Start, PidNS: self.PidNS, Boot: self.Boot}
}

// TestStoppedPeerKept: a peer process stopped (SIGSTOP, as a debugger
// does) for several keepalive periods keeps its conn, which carries data both
// ways once it runs again; before, keepalive took it for dead after about
// 1.6 s and reset the conn. The same peer killed still fails the conn. On
// the kernel-TCP lane the stop never mattered (TCP keepalive is the
// kernel's, which answers for a stopped process).
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
			// Short enough for several periods in a few seconds, long enough
			// for a resumed child on a loaded machine to answer in time.
			const ka = time.Second
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
				// Each keepalive period it stays silent, it is found stopped
				// again (a condition, not a timing: 30 s only bounds a hang),
				// a KeepAlive apart at least: the fourth time is 4
				// keepalives into the stop. It resumes right after that
				// look, with a whole KeepAlive to answer the next PING; one
				// resumed at a fixed time could come just before a look
				// and have only milliseconds.
				require.Eventually(t, func() bool { return tr.Stats().KeepAliveStopped >= 4 }, 30*time.Second, time.Millisecond,
					"keepalive never found the peer stopped")
			} else {
				time.Sleep(4*ka - time.Since(stopped)) // the scenario: stopped for 4 keepalives at least
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

// keepStopped spares a peer whose process is stopped at each check, and
// once more after it resumes (a PING sent during the stop may find it
// running only just before the check), then judges it as any other peer;
// a process never found stopped is not spared.
func TestKeepStoppedResumeGrace(t *testing.T) {
	cmd, id := sleepingChild(t)
	const ka = time.Second
	p := &peer{proc: id, ka: ka}
	tr := &Transport{}
	sh := newShard(tr, 0)
	sh.peers["p"] = p
	tr.shards = []*shard{sh}
	// An hour back: each stop found holds the process's FIFO repairs
	// (smWatch) until 2 KeepAlives after that now, which must not reach
	// into the tests that run after this one.
	now := time.Now().Add(-time.Hour).UnixNano()

	require.False(t, tr.keepStopped(p, now), "running, never found stopped")
	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	require.Eventually(t, func() bool { return stopped(id) }, 10*time.Second, time.Millisecond)
	now += int64(ka)
	require.True(t, tr.keepStopped(p, now), "stopped")
	require.Equal(t, now, p.lastRecv.Load(), "a stop counts as a sign of life")
	now += int64(ka)
	require.True(t, tr.keepStopped(p, now), "still stopped")

	require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
	require.Eventually(t, func() bool { return !stopped(id) }, 10*time.Second, time.Millisecond)
	now += int64(ka)
	require.True(t, tr.keepStopped(p, now), "resumed since the last check: spared once")
	now += int64(ka)
	require.False(t, tr.keepStopped(p, now), "running and silent a KeepAlive after the grace")
	require.EqualValues(t, 3, tr.stats.keepAliveStopped.Load())

	// A stop long ago gives no grace.
	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	require.Eventually(t, func() bool { return stopped(id) }, 10*time.Second, time.Millisecond)
	require.True(t, tr.keepStopped(p, now))
	require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
	require.Eventually(t, func() bool { return !stopped(id) }, 10*time.Second, time.Millisecond)
	require.False(t, tr.keepStopped(p, now+int64(3*ka)), "resumed, but the stop was seen 3 KeepAlives ago")
}

// stopped reports whether id names a process that procstat finds stopped.
func stopped(id stream.ProcID) bool {
	state, ok := procstat.StateOf(id)
	return ok && procstat.Stopped(state)
}

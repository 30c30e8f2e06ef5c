//go:build linux

package session

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/ucxconf"
	"github.com/ucxnet/ucxnet/registry"
)

// pausedFor is how long the tests pause a peer: longer than the whole
// keepalive timeout they run with, so that only the kernel keeps it.
const pausedFor = 5 * time.Second

// cgroupPause puts pid in a fresh cgroup of the v1 controller and applies
// pause (file → value), then undo after pausedFor; the cgroup is removed
// when the test ends, whatever happens. It skips without root or without
// the controller.
func cgroupPause(t *testing.T, controller string, pid int, pause, undo [][2]string) {
	t.Helper()
	root := filepath.Join("/sys/fs/cgroup", controller)
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a cgroup")
	}
	if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
		t.Skipf("no cgroup v1 %s controller mounted at %s", controller, root)
	}
	dir := filepath.Join(root, fmt.Sprintf("ucxnet-test-%d-%d", os.Getpid(), pid))
	require.NoError(t, os.Mkdir(dir, 0o755))
	write := func(file, v string) error { return os.WriteFile(filepath.Join(dir, file), []byte(v), 0) }
	t.Cleanup(func() {
		for _, kv := range undo {
			write(kv[0], kv[1])
		}
		// Back to the root group (a dead child has left it already).
		os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
		for range 100 {
			if os.Remove(dir) == nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	require.NoError(t, write("cgroup.procs", strconv.Itoa(pid)))
	for _, kv := range pause {
		require.NoError(t, write(kv[0], kv[1]))
	}
	if controller == "freezer" {
		require.Eventually(t, func() bool {
			b, _ := os.ReadFile(filepath.Join(dir, "freezer.state"))
			return strings.TrimSpace(string(b)) == "FROZEN"
		}, 10*time.Second, time.Millisecond, "the child never froze")
	}
	time.Sleep(pausedFor)
	for _, kv := range undo {
		require.NoError(t, write(kv[0], kv[1]))
	}
}

// TestPausedPeerKeepsConn: a peer process frozen (cgroup freezer, as
// docker pause does) or throttled to 0.1% of a CPU (a CFS quota, as a
// container CPU limit is) for longer than the whole keepalive timeout
// keeps its conn, on both lanes, and the conn carries an echo after. On
// the UCX lane the kernel channel says the process lives; on the
// kernel-TCP lane the kernel answers TCP's keepalive.
func TestPausedPeerKeepsConn(t *testing.T) {
	for _, pause := range []string{"freeze", "throttle"} {
		for _, lane := range []string{LaneUCX, LaneTCP} {
			t.Run(pause+"/"+lane, func(t *testing.T) { testPausedPeer(t, pause, lane) })
		}
	}
}

func testPausedPeer(t *testing.T, pause, lane string) {
	if testing.Short() {
		t.Skip("pauses a child process for 5 s")
	}
	if lane == LaneUCX {
		needUCX(t)
	}
	if lane == LaneTCP && !ucxconf.TCPEnabled(os.Getenv("UCX_TLS")) {
		t.Skipf("UCX_TLS=%q: a listener opens no TCP port", os.Getenv("UCX_TLS"))
	}
	dir := t.TempDir()
	child := startChild(t, dir, "paused")
	reg, err := registry.NewDir(dir)
	require.NoError(t, err)
	tr, err := newUCXTransport(Config{Registry: reg, Lane: lane})
	require.NoError(t, err)
	defer tr.Close()
	c, err := (&Dialer{Transport: tr, Timeout: 10 * time.Second}).Dial(Network, "paused")
	require.NoError(t, err)
	defer c.Close()
	if got, _ := c.(*testConn).Lane(); got != lane {
		t.Skipf("the conn took the %s lane, not %s (UCX_TLS=%q)", got, lane, os.Getenv("UCX_TLS"))
	}
	// Idle 100 ms and 9 probes 100 ms apart: 1 s, well inside the pause
	// (the kernel-TCP lane's socket counts whole seconds: 10 s, inside
	// the pause and its round trips' guards).
	require.NoError(t, c.(*testConn).SetKeepAliveConfig(net.KeepAliveConfig{
		Enable: true, Idle: 100 * time.Millisecond, Interval: 100 * time.Millisecond, Count: 9}))
	roundTrip(t, c, "before")
	pid := child.Process.Pid
	switch pause {
	case "freeze":
		cgroupPause(t, "freezer", pid, [][2]string{{"freezer.state", "FROZEN"}}, [][2]string{{"freezer.state", "THAWED"}})
	case "throttle":
		cgroupPause(t, "cpu", pid, [][2]string{{"cpu.cfs_period_us", "1000000"}, {"cpu.cfs_quota_us", "1000"}},
			[][2]string{{"cpu.cfs_quota_us", "-1"}})
	}
	for range 10 {
		roundTrip(t, c, "after")
	}
	st := tr.Stats()
	t.Logf("%s/%s: keepalive failures %d, kept by the kernel channel %d", pause, lane, st.KeepAliveFailures, st.KeepAliveKernel)
	require.Zero(t, st.KeepAliveFailures, "keepalive took the paused peer for dead")
	if pause == "freeze" && lane == LaneUCX {
		// A frozen peer answers nothing: only the kernel kept it.
		require.Positive(t, st.KeepAliveKernel, "keepalive never judged the frozen peer")
	}
}

package registry

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An entry whose publisher has exited but is not reaped yet (a zombie:
// kill(pid, 0) still succeeds) is stale, not live.
func TestZombiePublisherIsStale(t *testing.T) {
	d := newTestDir(t)
	cmd := exec.Command("true")
	require.NoError(t, cmd.Start())
	defer cmd.Wait()
	pid := cmd.Process.Pid
	require.Eventually(t, func() bool { return procZombie(pid) }, 5*time.Second, time.Millisecond)
	require.NoError(t, syscall.Kill(pid, 0), "a zombie still answers kill(pid, 0)")

	host, _ := os.Hostname()
	e := Entry{Name: "zombie", Address: []byte{1}, PID: pid, Host: host}
	writeEntryFile(t, d, e.Name, e)
	_, err := d.Resolve(context.Background(), "zombie")
	require.ErrorIs(t, err, ErrNotFound)
	require.Contains(t, err.Error(), "stale")
}

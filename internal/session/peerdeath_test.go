package session

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/registry"
)

// TestPeerDeathMatrix kills a peer process with SIGKILL while this side is
// receiving only, sending only, idle, or blocked in Write on a full window,
// with the dead child reaped at once or left a zombie (UCX's shared-memory
// peer check counts a zombie as alive). Blocked I/O must fail with
// ECONNRESET, and a new dial to the dead name must be refused. It runs
// under the UCX_TLS of the run; under UCX_TLS=sm it also runs with UCX_TLS
// unset (UCX's own choice of transports). Detection times are logged (the
// figures in docs/RELIABILITY.md come from these logs); the bound asserted
// is a hang check, not a timing.
func TestPeerDeathMatrix(t *testing.T) {
	needUCX(t)
	tlsModes := []string{os.Getenv("UCX_TLS")}
	if os.Getenv("UCX_TLS") == "sm" {
		tlsModes = append(tlsModes, "unset")
	}
	for _, tls := range tlsModes {
		for _, pattern := range []string{"receive-only", "send-only", "idle", "blocked-write"} {
			for _, zombie := range []bool{false, true} {
				reap := "reaped"
				if zombie {
					reap = "zombie"
				}
				t.Run(fmt.Sprintf("%s/%s/%s", tlsName(tls), pattern, reap), func(t *testing.T) {
					t.Parallel()
					peerDeathCase(t, tls, pattern, zombie)
				})
			}
		}
	}
}

func tlsName(tls string) string {
	if tls == "" {
		return "default"
	}
	return tls
}

func peerDeathCase(t *testing.T, tls, pattern string, zombie bool) {
	dir := t.TempDir()
	mode := map[string]string{"receive-only": "stream", "send-only": "discard", "idle": "idle", "blocked-write": "idle"}[pattern]
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v=false")
	env := append(os.Environ(), childEnv+"=victim", childModeEnv+"="+mode, "UCXNET_REGISTRY=dir:"+dir, "GORACE=atexit_sleep_ms=0")
	cfg := Config{Window: 256 << 10}
	if tls == "unset" {
		env = append(env, "UCX_TLS=all")
		cfg.UCX = map[string]string{"TLS": "all"}
	}
	cmd.Env = env
	child := startCmd(t, cmd)
	reg, err := registry.NewDir(dir)
	require.NoError(t, err)
	cfg.Registry = reg
	tr, err := newUCXTransport(cfg)
	require.NoError(t, err)
	defer tr.Close()
	d := Dialer{Transport: tr, Timeout: 10 * time.Second}
	c, err := d.Dial(Network, "victim")
	require.NoError(t, err)
	defer c.Close()

	ioErr := make(chan error, 1)
	moved := make(chan struct{}, 1)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			var err error
			switch pattern {
			case "receive-only", "idle":
				_, err = c.Read(buf)
			default:
				_, err = c.Write(buf)
			}
			if err != nil {
				ioErr <- err
				return
			}
			select {
			case moved <- struct{}{}:
			default:
			}
		}
	}()
	if pattern == "receive-only" || pattern == "send-only" {
		select {
		case <-moved:
		case err := <-ioErr:
			t.Fatalf("I/O failed before the kill: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("no data moved")
		}
	}
	time.Sleep(300 * time.Millisecond) // blocked-write: let the window fill
	killed := time.Now()
	require.NoError(t, child.Process.Signal(syscall.SIGKILL))
	if !zombie {
		child.Wait()
	}
	select {
	case err := <-ioErr:
		detected := time.Since(killed)
		t.Logf("detected %v after SIGKILL: %v", detected.Round(time.Millisecond), err)
		require.True(t, errors.Is(err, syscall.ECONNRESET), "%v", err)
		var op *net.OpError
		require.ErrorAs(t, err, &op)
	case <-time.After(15 * time.Second):
		t.Fatal("blocked I/O on a dead peer did not fail within 15 s")
	}
	_, err = d.Dial(Network, "victim")
	require.True(t, errors.Is(err, syscall.ECONNREFUSED), "dial to the dead name: %v", err)
}

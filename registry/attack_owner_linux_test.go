package registry

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// startFakeRegistry runs the test binary as a as the fake registry on
// addr and returns its port and its output lines.
func startFakeRegistry(t *testing.T, a attacker, addr string) (int, <-chan string) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	bin, err := os.ReadFile(exe)
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "ucxnet-fakereg-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	copyExe := filepath.Join(dir, "fakereg")
	require.NoError(t, os.WriteFile(copyExe, bin, 0o755))

	cmd := exec.Command(copyExe)
	cmd.Dir = "/"
	cmd.Env = []string{envFakeRegistry + "=" + addr, "HOME=/nonexistent"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(a.uid), Gid: uint32(a.gid)}}
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := make(chan string, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		<-done
		_ = cmd.Wait()
	})
	select {
	case l := <-lines:
		var port int
		_, err := fmt.Sscanf(l, "port %d", &port)
		require.NoError(t, err, "fake registry said %q", l)
		return port, lines
	case <-time.After(30 * time.Second):
		t.Fatal("the fake registry did not start within 30 s")
	}
	return 0, nil
}

// TestAttackLoopbackRegistrySquat: another user takes the registry's port
// on this host first (on 127.0.0.1, and on [::], which also takes IPv4
// connections). A client with the default token must neither send it
// there nor believe the answers: it fails with ErrForeignRegistry naming
// the owner. A request made afterwards shows that the fake registry was
// up and saw no token.
func TestAttackLoopbackRegistrySquat(t *testing.T) {
	a := newAttacker(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv(EnvRegistryToken, "")
	t.Setenv(EnvRegistryTokenFile, "")
	def, err := DefaultTokenFile()
	require.NoError(t, err)
	tok, _, err := EnsureTokenFile(def)
	require.NoError(t, err)

	for _, listen := range []string{"127.0.0.1:0", "[::]:0"} {
		port, lines := startFakeRegistry(t, a, listen)
		url := fmt.Sprintf("http://127.0.0.1:%d", port)
		r, err := Open(url)
		require.NoError(t, err)
		e, err := r.Resolve(context.Background(), "svc")
		require.ErrorIs(t, err, ErrForeignRegistry, "listen %s: resolved %+v", listen, e)
		require.ErrorContains(t, err, fmt.Sprintf("belongs to uid %d", a.uid))
		require.ErrorContains(t, r.Register(context.Background(), testEntry("mine", "")), "belongs to uid")
		require.NoError(t, r.(*HTTP).Close())

		resp, err := http.Get(url + "/v1/entries/control")
		require.NoError(t, err)
		resp.Body.Close()
		for l := range lines {
			require.NotContains(t, l, tok, "the token reached the other user's server")
			if l == "auth " {
				break // the control request
			}
			t.Fatalf("the other user's server got a request before the control one: %q", l)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}

package session

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/registry"
)

// TestRegistryHTTPCrossProcess: a child process listens through an HTTP
// registry served by this process (UCXNET_REGISTRY=http://...), the parent
// dials it by name; once the child is SIGKILLed its lease runs out, the
// name no longer resolves and a dial is refused at once.
func TestRegistryHTTPCrossProcess(t *testing.T) {
	const (
		token = "cross-process-token"
		ttl   = 500 * time.Millisecond
	)
	srv := registry.NewServer(registry.ServerConfig{Token: token, SweepInterval: 100 * time.Millisecond})
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	reg, err := registry.NewHTTP(ts.URL, token, registry.WithLeaseTTL(ttl))
	require.NoError(t, err)
	defer reg.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v=false")
	cmd.Env = append(os.Environ(), childEnv+"=http-echo",
		registry.EnvRegistry+"="+ts.URL,
		registry.EnvRegistryToken+"="+token,
		registry.EnvRegistryTTL+"="+ttl.String(),
		"GORACE=atexit_sleep_ms=0")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "ready"), "child said %q", line)

	ctx := context.Background()
	e, err := reg.Resolve(ctx, "http-echo")
	require.NoError(t, err)
	require.Equal(t, cmd.Process.Pid, e.PID)

	tr, err := newUCXTransport(Config{Registry: reg})
	require.NoError(t, err)
	defer tr.Close()
	d := Dialer{Transport: tr, Timeout: 10 * time.Second}
	c, err := d.Dial(Network, "http-echo")
	require.NoError(t, err)
	msg := make([]byte, 256<<10)
	rand.Read(msg)
	go func() {
		c.Write(msg)
		c.(*testConn).CloseWrite()
	}()
	got, err := io.ReadAll(c)
	require.NoError(t, err)
	require.True(t, bytes.Equal(msg, got))
	c.Close()

	// Outliving a few TTLs, the child's refresher keeps the name alive.
	time.Sleep(2 * ttl)
	_, err = reg.Resolve(ctx, "http-echo")
	require.NoError(t, err)

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	cmd.Wait()
	killed := time.Now()
	require.Eventually(t, func() bool {
		_, err := reg.Resolve(ctx, "http-echo")
		return errors.Is(err, registry.ErrNotFound)
	}, 30*time.Second, 25*time.Millisecond, "the dead child's name outlived its lease") // nothing but the lease's expiry removes it
	t.Logf("name gone %v after SIGKILL (TTL %v)", time.Since(killed), ttl)

	_, err = d.Dial(Network, "http-echo")
	requirePromptRefusal(t, err)
	require.Contains(t, err.Error(), ts.URL)
	require.Equal(t, 0, srv.Len())
}

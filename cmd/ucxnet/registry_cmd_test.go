package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ucxnet/ucxnet/registry"
)

// regCommand returns a command running the binary with env added to the
// environment (later entries win).
func regCommand(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// TestRegistryCommand runs "ucxnet registry" and has "ucxnet cat -l" and
// "ucxnet cat" meet through it.
func TestRegistryCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const token = "test-token-123"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	home := []string{"HOME=" + t.TempDir(), "XDG_STATE_HOME="}

	// Without a token, a non-loopback address is a usage error.
	r, err := regCommand(ctx, append(home, registry.EnvRegistryToken+"="), "registry", "--no-token", "--listen", "0.0.0.0:0").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(r), "loopback") {
		t.Errorf("registry --no-token --listen 0.0.0.0:0: %v\n%s", err, r)
	}

	srv := regCommand(ctx, home, "registry", "--listen", "127.0.0.1:0", "--token-file", tokenFile)
	line, srvErr := startReady(t, srv, "listening on http://127.0.0.1:")
	base := strings.TrimPrefix(line, "listening on ")

	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("healthz: %s", resp.Status)
	}
	resp, err = http.Get(base + "/v1/entries")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/entries without token: %s, want 401", resp.Status)
	}
	http.DefaultClient.CloseIdleConnections()

	env := append(home, "UCXNET_REGISTRY="+base, registry.EnvRegistryToken+"="+token, registry.EnvRegistryTTL+"=1s")
	up, down := []byte("hello from the dialer\n"), []byte("hello from the listener\n")

	// cat -l NAME, in the background.
	lis := regCommand(ctx, env, "cat", "-l", "reg-cat")
	lis.Stdin = bytes.NewReader(down)
	var lisOut bytes.Buffer
	lis.Stdout = &lisOut
	lisErrR, lisErrW := io.Pipe()
	var lisErr lockedBuffer
	lis.Stderr = io.MultiWriter(&lisErr, lisErrW)
	if err := lis.Start(); err != nil {
		t.Fatal(err)
	}
	lisDone := make(chan error, 1)
	go func() {
		err := lis.Wait()
		lisErrW.Close()
		lisDone <- err
	}()
	listening := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(lisErrR)
		ok := false
		for sc.Scan() {
			if !ok && strings.Contains(sc.Text(), "listening as reg-cat") {
				ok = true
				listening <- true
			}
		}
		if !ok {
			listening <- false
		}
	}()
	if !<-listening {
		t.Fatalf("cat -l did not listen: %v\nstderr:\n%s", <-lisDone, lisErr.String())
	}
	if !strings.Contains(lisErr.String(), "registry "+base) {
		t.Errorf("cat -l does not name the HTTP registry:\n%s", lisErr.String())
	}

	// The entry is in the registry.
	h, err := registry.NewHTTP(base, token)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	e, err := h.Resolve(ctx, "reg-cat")
	if err != nil {
		t.Fatal(err)
	}
	if e.PID != lis.Process.Pid {
		t.Errorf("entry pid %d, want %d", e.PID, lis.Process.Pid)
	}

	// cat NAME.
	dial := regCommand(ctx, env, "cat", "reg-cat")
	dial.Stdin = bytes.NewReader(up)
	var dialOut, dialErr bytes.Buffer
	dial.Stdout, dial.Stderr = &dialOut, &dialErr
	if err := dial.Run(); err != nil {
		t.Fatalf("cat reg-cat: %v\nstderr:\n%s", err, dialErr.String())
	}
	if err := <-lisDone; err != nil {
		t.Fatalf("cat -l: %v\nstderr:\n%s", err, lisErr.String())
	}
	if !bytes.Equal(dialOut.Bytes(), down) || !bytes.Equal(lisOut.Bytes(), up) {
		t.Errorf("dialer got %q (want %q), listener got %q (want %q)", dialOut.Bytes(), down, lisOut.Bytes(), up)
	}
	// The listener withdrew its name.
	if _, err := h.Resolve(ctx, "reg-cat"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("after cat -l exited, Resolve: %v", err)
	}
	// A dial now fails at once.
	fail := regCommand(ctx, env, "cat", "reg-cat")
	out, err := fail.CombinedOutput()
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "connection refused") {
		t.Errorf("cat reg-cat after the listener left: %v\n%s", err, out)
	}

	// SIGTERM: a clean exit.
	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := srv.Wait(); err != nil {
		t.Errorf("registry after SIGTERM: %v\nstderr:\n%s", err, srvErr.String())
	}
	log := srvErr.String()
	for _, s := range []string{`PUT "/v1/entries/reg-cat" 201`, `GET "/v1/entries/reg-cat" 200`, `DELETE "/v1/entries/reg-cat" 204`, "stopped"} {
		if !strings.Contains(log, s) {
			t.Errorf("registry log lacks %q:\n%s", s, log)
		}
	}
	if strings.Contains(log, token) {
		t.Errorf("registry log shows the token:\n%s", log)
	}
}

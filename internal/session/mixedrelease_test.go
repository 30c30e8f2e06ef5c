//go:build cgo

package session

// Two processes on one host built against different UCX releases never
// share memory (their shared-memory transports are not proven compatible:
// 4 MB between 1.13.1 and 1.18.1 over sm failed with "Shared memory
// error" one way and stalled the other): they take another lane, whose
// reason names both releases, or, with nothing else in common, are refused
// with ECONNREFUSED.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/registry"
)

const (
	mixedRelEnv     = "UCXNET_MIXED_RELEASE" // the name the other release's child dials
	mixedRelVersion = "1.18.1"
	mixedRelBytes   = 4 << 20
)

// mixedRelPrefix is where scripts/build-ucx.sh installs the other release
// (make ucx-build UCX_VERSION=1.18.1).
func mixedRelPrefix() string {
	root := os.Getenv("UCX_PREFIX_ROOT")
	if root == "" {
		home, _ := os.UserHomeDir()
		root = filepath.Join(home, ".cache", "ucxnet-ucx")
	}
	return filepath.Join(root, mixedRelVersion)
}

// mixedRoundTrip writes mixedRelBytes of random data to an echo conn while it
// reads them back, and compares.
func mixedRoundTrip(c net.Conn) error {
	out := make([]byte, mixedRelBytes)
	rand.Read(out)
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(out)
		werr <- err
	}()
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	in := make([]byte, len(out))
	if _, err := io.ReadFull(c, in); err != nil {
		return fmt.Errorf("read back %w", err)
	}
	if err := <-werr; err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if !bytes.Equal(in, out) {
		return errors.New("bytes differ")
	}
	return nil
}

// TestLaneMixedReleaseHelper is not a test: it is the other release's half
// of TestLaneMixedRelease. It listens as "mixedrel-child" (echo), dials
// the name in mixedRelEnv, moves mixedRelBytes through it, reports
// "ok LANE: WHY" or "err ERROR" on stdout, and serves until stdin closes.
func TestLaneMixedReleaseHelper(t *testing.T) {
	name := os.Getenv(mixedRelEnv)
	if name == "" {
		t.Skip("helper process for TestLaneMixedRelease; runs only as its child")
	}
	ln, err := Listen(Network, "mixedrel-child")
	require.NoError(t, err)
	defer ln.Close()
	echoListener(ln)
	c, err := Dial(Network, name)
	if err == nil {
		err = mixedRoundTrip(c)
	}
	if err != nil {
		fmt.Printf("err %v\n", strings.ReplaceAll(err.Error(), "\n", " "))
	} else {
		lane, why := c.(*testConn).Lane()
		fmt.Printf("ok %s: %s\n", lane, why)
		c.Close()
	}
	io.Copy(io.Discard, os.Stdin)
}

func TestLaneMixedRelease(t *testing.T) {
	if !haveUCXBuild() {
		t.Skip("needs a build with UCX")
	}
	prefix := mixedRelPrefix()
	if _, err := os.Stat(filepath.Join(prefix, ".built")); err != nil {
		t.Skipf("needs UCX %s built in %s: run `make ucx-build UCX_VERSION=%s` (about 10 minutes), then `make test-mixed`", mixedRelVersion, prefix, mixedRelVersion)
	}
	if testLib().Version == mixedRelVersion {
		t.Skipf("this process runs UCX %s already", mixedRelVersion)
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	wd, err := os.Getwd()
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "other.test")
	build := exec.Command(goTool, "test", "-c", "-o", bin, ".")
	build.Dir = wd
	build.Env = append(os.Environ(), "PKG_CONFIG_PATH="+prefix+"/lib/pkgconfig",
		"CGO_CFLAGS=-O2 -g -I"+prefix+"/include", "CGO_LDFLAGS=-L"+prefix+"/lib")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building the test binary against UCX %s: %s", mixedRelVersion, out)
	for _, tls := range []string{"all", "sm,tcp", "sm"} {
		t.Run(tls, func(t *testing.T) { mixedReleasePair(t, bin, prefix, tls) })
	}
}

// mixedReleasePair runs the other release's child with UCX_TLS=tls and
// checks a conn each way.
func mixedReleasePair(t *testing.T, bin, prefix, tls string) {
	dir := t.TempDir()
	reg, err := registry.NewDir(dir)
	require.NoError(t, err)
	tr, err := newUCXTransport(Config{Registry: reg, UCX: map[string]string{"TLS": tls}})
	require.NoError(t, err)
	defer tr.Close()
	lc := ListenConfig{Transport: tr}
	ln, err := lc.Listen(context.Background(), "mixedrel-parent")
	require.NoError(t, err)
	defer ln.Close()
	echoListener(ln)

	cmd := exec.Command(bin, "-test.run=^TestLaneMixedReleaseHelper$", "-test.v=false")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "UCX_TLS=") && !strings.HasPrefix(kv, EnvLane+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, mixedRelEnv+"=mixedrel-parent", "UCXNET_REGISTRY=dir:"+dir,
		"UCX_TLS="+tls, "LD_LIBRARY_PATH="+prefix+"/lib")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer // its default Transport outlives the helper: goleak's report is noise
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	defer func() {
		stdin.Close()
		cmd.Wait()
		if t.Failed() {
			t.Logf("the child's stderr:\n%s", stderr.String())
		}
	}()
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if s := sc.Text(); strings.HasPrefix(s, "ok ") || strings.HasPrefix(s, "err ") {
				line <- s
				return
			}
		}
		line <- "err no report"
	}()
	var report string
	select {
	case report = <-line:
	case <-time.After(90 * time.Second):
		t.Fatal("no report from the child within 90 s")
	}
	t.Logf("UCX %s child: %s", mixedRelVersion, report)

	d := Dialer{Transport: tr, Timeout: 10 * time.Second}
	c, err := d.Dial(Network, "mixedrel-child")
	if tls == "sm" {
		// Shared memory is all either may use, and they may not share it.
		require.Error(t, err)
		require.True(t, errors.Is(err, syscall.ECONNREFUSED), "%v", err)
		require.True(t, strings.HasPrefix(report, "err ") && strings.Contains(report, "connection refused"), "the child: %s", report)
		return
	}
	require.NoError(t, err)
	defer c.Close()
	lane, why := c.(*testConn).Lane()
	t.Logf("UCX %s parent: %s: %s", testLib().Version, lane, why)
	require.Contains(t, why, mixedRelVersion, "the reason names the other release")
	require.NoError(t, mixedRoundTrip(c))
	require.True(t, strings.HasPrefix(report, "ok "), "the child: %s", report)
	require.Contains(t, report, testLib().Version, "the child's reason names this release")
}

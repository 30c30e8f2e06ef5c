package session

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/lane"
	"github.com/ucxnet/ucxnet/internal/ucxconf"
	"github.com/ucxnet/ucxnet/registry"
)

// A process built without cgo (kernel TCP only) and one with UCX talk to
// each other, both ways, over the kernel-TCP lane.

const mixedEnv = "UCXNET_MIXED_DIAL" // the name the no-cgo child dials

// TestLaneMixedHelper is not a test: it is the no-cgo half of
// TestLaneMixedBuild (its name passes the no-cgo build's test filter). It
// listens as "mixed-nocgo" (echo), dials the name in mixedEnv once, and
// reports the lane on stdout; it serves until stdin closes.
func TestLaneMixedHelper(t *testing.T) {
	name := os.Getenv(mixedEnv)
	if name == "" {
		t.Skip("helper process for TestLaneMixedBuild; runs only as its child")
	}
	ln, err := Listen(Network, "mixed-nocgo")
	require.NoError(t, err)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	c, err := Dial(Network, name)
	require.NoError(t, err)
	_, err = io.WriteString(c, "from nocgo")
	require.NoError(t, err)
	got := make([]byte, len("from nocgo"))
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	require.Equal(t, "from nocgo", string(got))
	name, why := c.(*testConn).Lane()
	fmt.Printf("lane %s: %s\n", name, why)
	c.Close()
	io.Copy(io.Discard, os.Stdin)
	ln.Close()
}

func TestLaneMixedBuild(t *testing.T) {
	if !haveUCXBuild() {
		t.Skip("this is the no-cgo side's test; run it from a build with UCX")
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		t.Skip("needs the go tool to build the no-cgo side: ", err)
	}
	wd, err := os.Getwd()
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "nocgo.test")
	build := exec.Command(goTool, "test", "-c", "-o", bin, ".")
	build.Dir = wd
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building the no-cgo test binary: %s", out)

	dir := t.TempDir()
	reg, err := registry.NewDir(dir)
	require.NoError(t, err)
	cfg := Config{Registry: reg, Lane: LaneAuto} // whatever UCXNET_LANE says
	if !ucxconf.TCPEnabled(os.Getenv("UCX_TLS")) {
		cfg.Lane = LaneTCP // UCX_TLS keeps a listener off TCP unless forced
	}
	tr, err := newUCXTransport(cfg)
	require.NoError(t, err)
	defer tr.Close()
	lc := ListenConfig{Transport: tr}
	ln, err := lc.Listen(t.Context(), "mixed-cgo")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()

	cmd := exec.Command(bin, "-test.run=^TestLaneMixedHelper$", "-test.v=false")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvLane+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, mixedEnv+"=mixed-cgo", "UCXNET_REGISTRY=dir:"+dir)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	defer func() { stdin.Close(); cmd.Wait() }()
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(60 * time.Second):
		t.Fatal("no report from the no-cgo child within 60 s")
	}
	t.Log("no-cgo child: ", line)
	require.Equal(t, "lane "+LaneTCP+": "+lane.ReasonNoUCXHere, strings.TrimSpace(line))

	d := Dialer{Transport: tr, Timeout: 10 * time.Second}
	c, err := d.Dial(Network, "mixed-nocgo")
	require.NoError(t, err)
	defer c.Close()
	name, why := c.(*testConn).Lane()
	if cfg.Lane == LaneAuto {
		require.Equal(t, lane.ReasonNoUCXPeer, why)
	}
	require.Equal(t, LaneTCP, name)
	_, err = io.WriteString(c, "from cgo")
	require.NoError(t, err)
	got := make([]byte, len("from cgo"))
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	require.Equal(t, "from cgo", string(got))
}

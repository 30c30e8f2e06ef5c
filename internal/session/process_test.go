package session

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/registry"
)

const (
	childEnv      = "UCXNET_TEST_CHILD"
	childModeEnv  = "UCXNET_TEST_CHILD_MODE"
	writeExitSize = 8 << 20
)

// TestHelperProcess is not a test: it is the server half of the
// cross-process tests, run in a child process.
func TestHelperProcess(t *testing.T) {
	name := os.Getenv(childEnv)
	if name == "" {
		t.Skip("helper process for the cross-process tests; runs only as their child")
	}
	ln, err := Listen(Network, name)
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	fmt.Println("ready", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(0)
		}
		switch os.Getenv(childModeEnv) {
		case "stream": // write without end
			go func() {
				buf := make([]byte, 64<<10)
				for {
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			}()
			continue
		case "discard": // read and drop without end
			go io.Copy(io.Discard, c)
			continue
		case "idle": // hold the conn, never read or write
			continue
		}
		if os.Getenv(childModeEnv) == "write-exit" {
			// Write a known stream, Close, and exit at once: Close's linger
			// must have handed every frame to the transport.
			buf := make([]byte, writeExitSize)
			for i := range buf {
				buf[i] = byte(i * 7)
			}
			c.Write(buf)
			c.Close()
			os.Exit(0)
		}
		go func() {
			io.Copy(c, c)
			c.Close()
		}()
	}
}

// startChild starts an echo server in another process, publishing name in
// the directory registry dir.
func startChild(t *testing.T, dir, name string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v=false")
	cmd.Env = append(os.Environ(), childEnv+"="+name, "UCXNET_REGISTRY=dir:"+dir, "GORACE=atexit_sleep_ms=0")
	return startCmd(t, cmd)
}

// startCmd starts a TestHelperProcess child and waits for its "ready"
// line; the test's cleanup kills it.
func startCmd(t *testing.T, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "ready"), "child said %q", line)
	return cmd
}

func TestCrossProcess(t *testing.T) {
	dir := t.TempDir()
	startChild(t, dir, "echo")
	reg, err := registry.NewDir(dir)
	require.NoError(t, err)
	tr, err := newUCXTransport(Config{Registry: reg})
	require.NoError(t, err)
	defer tr.Close()
	d := Dialer{Transport: tr, Timeout: 10 * time.Second}

	for range 3 {
		c, err := d.Dial(Network, "echo")
		require.NoError(t, err)
		t.Logf("transports: %v", c.(*testConn).Transports())
		msg := make([]byte, 5<<20)
		rand.Read(msg)
		go func() {
			c.Write(msg)
			c.(*testConn).CloseWrite()
		}()
		got, err := io.ReadAll(c)
		require.NoError(t, err)
		require.True(t, bytes.Equal(msg, got))
		c.Close()
	}
}

// A peer killed with SIGKILL mid-transfer: blocked Read and Write fail with
// ECONNRESET within seconds, other conns keep working, and a new dial to
// the dead name is refused at once.
func TestPeerDeath(t *testing.T) {
	needUCX(t)
	dir := t.TempDir()
	child := startChild(t, dir, "victim")
	startChild(t, dir, "survivor")
	reg, err := registry.NewDir(dir)
	require.NoError(t, err)
	tr, err := newUCXTransport(Config{Registry: reg, Window: 256 << 10})
	require.NoError(t, err)
	defer tr.Close()
	d := Dialer{Transport: tr, Timeout: 10 * time.Second}

	reader, err := d.Dial(Network, "victim")
	require.NoError(t, err)
	writer, err := d.Dial(Network, "victim")
	require.NoError(t, err)
	other, err := d.Dial(Network, "survivor")
	require.NoError(t, err)

	readErr := make(chan error, 1)
	go func() {
		_, err := reader.Read(make([]byte, 1))
		readErr <- err
	}()
	writeErr := make(chan error, 1)
	go func() {
		// The echo comes back to us unread, so this write blocks on the window.
		buf := make([]byte, 64<<10)
		for {
			if _, err := writer.Write(buf); err != nil {
				writeErr <- err
				return
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)
	killed := time.Now()
	require.NoError(t, child.Process.Signal(syscall.SIGKILL))
	child.Wait()

	for _, ch := range []chan error{readErr, writeErr} {
		select {
		case err := <-ch:
			require.True(t, errors.Is(err, syscall.ECONNRESET), "%v", err)
			var op *net.OpError
			require.ErrorAs(t, err, &op)
		case <-time.After(10 * time.Second):
			t.Fatal("blocked I/O on a dead peer did not fail within 10 s")
		}
	}
	t.Logf("failure detected %v after SIGKILL", time.Since(killed))

	_, err = d.Dial(Network, "victim")
	requirePromptRefusal(t, err)

	go other.Write([]byte("ping"))
	buf := make([]byte, 4)
	_, err = io.ReadFull(other, buf)
	require.NoError(t, err)
	require.Equal(t, "ping", string(buf))
	other.Close()
}

// A process that writes, closes and exits at once loses nothing: the peer
// reads every byte, then io.EOF.
func TestWriteCloseExit(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(childModeEnv, "write-exit")
	child := startChild(t, dir, "writer")
	reg, err := registry.NewDir(dir)
	require.NoError(t, err)
	tr, err := newUCXTransport(Config{Registry: reg})
	require.NoError(t, err)
	defer tr.Close()
	d := Dialer{Transport: tr, Timeout: 10 * time.Second}
	c, err := d.Dial(Network, "writer")
	require.NoError(t, err)
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := io.ReadAll(c)
	require.NoError(t, err, "after %d bytes", len(got))
	require.Len(t, got, writeExitSize)
	for i := range got {
		if got[i] != byte(i*7) {
			t.Fatalf("byte %d corrupted", i)
		}
	}
	child.Wait()
}

// Closing a Transport does not turn conns closed cleanly into resets: the
// peer reads everything, then io.EOF.
func TestTransportCloseAfterCleanClose(t *testing.T) {
	p := newPair(t, Config{})
	c, s := p.conns(t)
	defer s.Close()
	msg := []byte("last words")
	_, err := c.Write(msg)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.NoError(t, p.client.Close())
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(s)
	require.NoError(t, err)
	require.Equal(t, msg, got)
}

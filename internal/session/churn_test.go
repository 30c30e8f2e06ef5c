//go:build linux

package session

// Peers exiting, closing and being killed at random points while conns
// dial, write and close, both ways: no process aborts, and the survivor
// is left with no conn.

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/registry"
)

const (
	churnEnv      = "UCXNET_CHURN"      // the child's seed
	churnSeedEnv  = "UCXNET_CHURN_SEED" // replays a run
	churnHubEnv   = "UCXNET_CHURN_HUB"  // the hub's seed
	churnRounds   = 6
	churnChildren = 3
	// churnWireupAbort is UCX 1.13's assertion when an endpoint fails
	// while its wireup reply is still queued: a peer that exits within
	// milliseconds of its first message can trigger it (UCX removed the
	// assertion in 1.14; docs/RELIABILITY.md, "Known UCX 1.13 hazards").
	churnWireupAbort = "ucp_request.c:684"
)

// churnConn writes up to 256 KiB on c, reads some of the echo, and closes
// c at a random point (or leaves it to the process's end).
func churnConn(rng *rand.Rand, c net.Conn) {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	n := rng.IntN(256 << 10)
	go func() { _, _ = c.Write(make([]byte, n)) }()
	if rng.IntN(2) == 0 {
		_, _ = io.CopyN(io.Discard, c, int64(rng.IntN(n+1)))
	}
	if rng.IntN(4) != 0 {
		c.Close()
	}
}

// TestChurnHelper is not a test: it is a peer of TestChurnNoAbort. It
// echoes on its listener, dials the parent a few times, and ends at a
// random point: exiting at once, closing everything first, or waiting to
// be killed.
func TestChurnHelper(t *testing.T) {
	seed := os.Getenv(churnEnv)
	if seed == "" {
		t.Skip("helper process for TestChurnNoAbort; runs only as its child")
	}
	parent := os.Getppid()
	s, _ := strconv.ParseUint(seed, 10, 64)
	rng := rand.New(rand.NewPCG(s, 1))
	ln, err := Listen(Network, "churn-"+seed)
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	fmt.Println("ready")
	var conns []net.Conn
	for range rng.IntN(4) {
		c, err := Dial(Network, "churn-parent")
		if err != nil {
			continue
		}
		conns = append(conns, c)
		churnConn(rng, c)
	}
	time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
	switch rng.IntN(3) {
	case 0:
		os.Exit(0) // conns, listener and transport left as they are
	case 1:
		for _, c := range conns {
			c.Close()
		}
		ln.Close()
		os.Exit(0)
	}
	// Killed by the parent; or, if the parent (the hub) died first, as
	// UCX 1.13 may make it, gone on its own rather than left behind.
	for os.Getppid() == parent {
		time.Sleep(100 * time.Millisecond)
	}
	os.Exit(0)
}

// TestChurnNoAbort runs the hub of the churn (TestChurnHubHelper) in a
// process of its own: UCX 1.13 may abort the hub too, when a peer dies
// while the hub's wireup reply to it is queued (churnWireupAbort), and
// that abort, counted, is the only one allowed.
func TestChurnNoAbort(t *testing.T) {
	needUCX(t)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(churnSeedEnv); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (%s=%d replays it)", seed, churnSeedEnv, seed)
	cmd := exec.Command(os.Args[0], "-test.run=^TestChurnHubHelper$", "-test.v")
	cmd.Env = append(os.Environ(), churnHubEnv+"="+strconv.FormatUint(seed, 10), "GORACE=atexit_sleep_ms=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the churn's hub did not end within 3 minutes:\n%s", out.String())
	}
	switch {
	case err == nil:
		t.Logf("hub:\n%s", lastLines(out.String(), 3))
	case strings.Contains(out.String(), churnWireupAbort) && strings.HasPrefix(testLib().Version, "1.13."):
		t.Logf("the hub ended by UCX %s's wireup assertion (%s), fixed in UCX 1.14", testLib().Version, churnWireupAbort)
	default:
		t.Fatalf("the churn's hub: %v\n%s", err, out.String())
	}
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestChurnHubHelper is not a test: it is the hub of TestChurnNoAbort, in
// a process of its own. It listens, starts peers round after round, dials
// them and is dialed by them while they end at random points, and checks
// that no peer aborted (but for UCX 1.13's wireup assertion) and that no
// conn is left open.
func TestChurnHubHelper(t *testing.T) {
	v := os.Getenv(churnHubEnv)
	if v == "" {
		t.Skip("helper process for TestChurnNoAbort; runs only as its child")
	}
	seed, _ := strconv.ParseUint(v, 10, 64)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	reg, err := registry.NewDir(dir)
	require.NoError(t, err)
	tr, err := newUCXTransport(Config{Registry: reg})
	require.NoError(t, err)
	defer tr.Close()
	ln, err := (&ListenConfig{Transport: tr}).Listen(t.Context(), "churn-parent")
	require.NoError(t, err)
	defer ln.Close()
	echoListener(ln)
	d := Dialer{Transport: tr, Timeout: 3 * time.Second}
	tolerated := 0
	for round := range churnRounds {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for range churnChildren {
			cs := rng.Uint64() >> 1
			cmd := exec.Command(os.Args[0], "-test.run=^TestChurnHelper$", "-test.v=false")
			cmd.Env = append(os.Environ(), churnEnv+"="+strconv.FormatUint(cs, 10), "UCXNET_REGISTRY=dir:"+dir, "GORACE=atexit_sleep_ms=0")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			ready := make([]byte, 6)
			_, _ = io.ReadFull(out, ready)
			crs := rand.New(rand.NewPCG(cs, 2))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range crs.IntN(4) {
					if c, err := d.Dial(Network, "churn-"+strconv.FormatUint(cs, 10)); err == nil {
						churnConn(crs, c)
					}
				}
				if crs.IntN(2) == 0 {
					time.Sleep(time.Duration(crs.IntN(300)) * time.Millisecond)
					cmd.Process.Kill()
				}
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				var werr error
				select {
				case werr = <-done:
				case <-time.After(2 * time.Second):
					cmd.Process.Kill() // one that waits to be killed
					werr = <-done
				}
				mu.Lock()
				defer mu.Unlock()
				if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
					return
				}
				switch {
				case werr == nil:
				case strings.Contains(stderr.String(), churnWireupAbort) && strings.HasPrefix(testLib().Version, "1.13."):
					tolerated++
					t.Logf("round %d, child %d: UCX %s's wireup assertion (%s), fixed in UCX 1.14", round, cs, testLib().Version, churnWireupAbort)
				default:
					t.Errorf("round %d, child %d (seed %d): %v\n%s", round, cs, seed, werr, stderr.String())
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
	}
	require.Eventually(t, func() bool { return tr.Stats().OpenConns == 0 }, 30*time.Second, 50*time.Millisecond,
		"conns left open after every peer ended: %d", tr.Stats().OpenConns)
	t.Logf("%d rounds of %d peers; %d children ended by UCX 1.13's wireup assertion", churnRounds, churnChildren, tolerated)
}

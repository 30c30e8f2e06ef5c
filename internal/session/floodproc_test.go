//go:build linux

package session

// The ingress flood from a process of its own, as an attacker runs it:
// the flooder has its own CPU time and its own worker, and the victim's
// worker receives and dispatches every frame it sends until it is failed.

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/stream"
)

const (
	floodAddrEnv = "UCXNET_FLOOD_ADDR" // the victim worker's address, hex
	floodNameEnv = "UCXNET_FLOOD_NAME" // the listener the flooder connects to
)

// TestIngressFloodHelper is not a test: it is the flooder of
// TestIngressFloodFromProcess. It connects to the listener as a raw UCX
// peer, then sends PINGs, PINGs for a conn that is not its own and WINDOWs
// that grant one byte as fast as it can, until a send fails or 30 s pass.
func TestIngressFloodHelper(t *testing.T) {
	a := os.Getenv(floodAddrEnv)
	if a == "" {
		t.Skip("helper process for TestIngressFloodFromProcess; runs only as its child")
	}
	addr, err := hex.DecodeString(a)
	require.NoError(t, err)
	r := newRawPeerAt(t, addr, func([]byte) []byte { return addr })
	id := r.connect(t, os.Getenv(floodNameEnv), 7, 1<<20)
	fmt.Println("flooding")
	frames := [][]byte{
		hdrBytes(stream.Header{Kind: stream.KindPing, ConnID: id, Aux: 1}),
		hdrBytes(stream.Header{Kind: stream.KindPing, ConnID: 0xdead}),
		hdrBytes(stream.Header{Kind: stream.KindWindow, ConnID: id, Aux: 1}),
	}
	end := time.Now().Add(30 * time.Second)
	for i := 0; time.Now().Before(end); i++ {
		if r.sendErr(frames[i%len(frames)], nil) != nil {
			return
		}
	}
}

// TestIngressFloodFromProcess: a child process floods the listener's
// worker with frames that carry no data while an honest pair in this
// process times its round trips. The flooder is failed, every honest
// round trip completes, and the honest conn carries on after. The round
// trips made while the flood ran are logged against their quiet value
// (not a pass/fail figure).
func TestIngressFloodFromProcess(t *testing.T) {
	p := newPair(t, Config{})
	target, err := stripSharedMemory(p.server.eng.Address())
	if err != nil || len(target) == 0 {
		t.Skipf("UCX_TLS=%q: a process that no kernel channel vouches for reaches a worker over tcp only, and this run offers no tcp", os.Getenv("UCX_TLS"))
	}
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	go func() { _, _ = io.Copy(s, s) }()
	quiet := roundTrips(t, c, 200)

	cmd := exec.Command(os.Args[0], "-test.run=^TestIngressFloodHelper$", "-test.v=false")
	cmd.Env = append(os.Environ(), floodAddrEnv+"="+hex.EncodeToString(target),
		floodNameEnv+"="+p.ln.Addr().String(), "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		if line != "flooding\n" {
			t.Logf("flooder: %q", line)
		}
		_, _ = io.Copy(io.Discard, out)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	fc, err := p.ln.Accept()
	require.NoError(t, err)
	defer fc.Close()

	// Round trips while the flood runs, until the flooder is failed.
	start := time.Now()
	during, n := roundTripsWhile(t, c, func() bool {
		return p.server.Stats().PeersFlooded == 0 && time.Since(start) < 20*time.Second
	})
	t.Logf("flood ran %v from its conn's accept to the verdict; %d honest round trips meanwhile: p50 %v (%.1fx quiet %v)",
		time.Since(start).Round(time.Millisecond), n, during, float64(during)/float64(quiet), quiet)
	require.EqualValues(t, 1, p.server.Stats().PeersFlooded, "the flooding process was not failed within 20 s")
	after := roundTrips(t, c, 200) // the honest conn carries on
	t.Logf("honest round trip p50 after the verdict %v (%.1fx quiet)", after, float64(after)/float64(quiet))
	select {
	case <-exited:
		exited <- nil // for the cleanup
	case <-time.After(15 * time.Second):
		t.Errorf("the flooder still sends 15 s after it was failed")
	}
}

package session

// Floods from a process of their own, as an attacker runs them: the
// flooder has its own CPU time and its own UCX workers, and the victim's
// worker receives every frame it sends. (A flooder in the test's own
// process would take the Go scheduler's time from the honest conn whose
// round trips the tests time, and measure that instead.)

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/lane"
	"github.com/ucxnet/ucxnet/internal/stream"
)

const (
	floodModeEnv = "UCXNET_FLOOD_MODE" // what TestFloodHelper sends
	floodAddrEnv = "UCXNET_FLOOD_ADDR" // the victim worker's address, hex
	floodNameEnv = "UCXNET_FLOOD_NAME" // the listener it names
	// A lane flood's source address and hello (hex; empty: silent conns);
	// floodAddrEnv is then the lane's ip:port.
	floodFromEnv  = "UCXNET_FLOOD_FROM"
	floodHelloEnv = "UCXNET_FLOOD_HELLO"
)

// The floods TestFloodHelper sends.
const (
	floodIngress  = "ingress"  // PINGs, stray PINGs and empty WINDOWs on a conn of its own
	floodUnproven = "unproven" // CONNECTs with challenges it never proves, from 16 workers
	floodForged   = "forged"   // CONNECTs naming forged worker addresses, from 16 workers
	floodLane     = "lane"     // kernel-TCP conns that each send a hello (or nothing) and wait
	floodWorkers  = 16
)

// TestFloodHelper is not a test: it is the flooding process of the tests
// that call startFlood. It floods the worker at UCXNET_FLOOD_ADDR as
// UCXNET_FLOOD_MODE says, as fast as it can, until every send fails or
// a minute passes.
func TestFloodHelper(t *testing.T) {
	mode := os.Getenv(floodModeEnv)
	if mode == "" {
		t.Skip("helper process for the flood tests; runs only as their child")
	}
	end := time.Now().Add(time.Minute)
	if mode == floodLane {
		hello, err := hex.DecodeString(os.Getenv(floodHelloEnv))
		require.NoError(t, err)
		if len(hello) == 0 {
			hello = nil // a silent conn
		}
		opened := floodTCP(t, os.Getenv(floodFromEnv), os.Getenv(floodAddrEnv), lane.MaxPending, hello)
		require.Eventually(t, func() bool { return opened.Load() >= lane.MaxPending }, 30*time.Second, time.Millisecond)
		fmt.Println("flooding")
		time.Sleep(time.Until(end))
		return
	}
	addr, err := hex.DecodeString(os.Getenv(floodAddrEnv))
	require.NoError(t, err)
	name := os.Getenv(floodNameEnv)
	if mode == floodIngress {
		r := newRawPeerAt(t, addr, func([]byte) []byte { return addr })
		id := r.connect(t, name, 7, 1<<20)
		fmt.Println("flooding")
		frames := [][]byte{
			hdrBytes(stream.Header{Kind: stream.KindPing, ConnID: id, Aux: 1}),
			hdrBytes(stream.Header{Kind: stream.KindPing, ConnID: 0xdead}),
			hdrBytes(stream.Header{Kind: stream.KindWindow, ConnID: id, Aux: 1}),
		}
		for i := 0; time.Now().Before(end); i++ {
			if r.sendErr(frames[i%len(frames)], nil) != nil {
				return
			}
		}
		return
	}
	var wg sync.WaitGroup
	raws := make([]*rawPeer, floodWorkers)
	for i := range raws {
		raws[i] = newRawPeerAt(t, addr, func([]byte) []byte { return addr })
	}
	fmt.Println("flooding")
	for i, r := range raws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := uint64(0); time.Now().Before(end); n++ {
				hello := stream.Hello{ConnID: uint64(i)<<32 | n + 1, EagerMax: 1 << 20, Window: 1 << 20, Name: name,
					WorkerAddr: r.eng.Address(), Nonce: randomChallenge()}
				if mode == floodForged {
					hello.WorkerAddr, hello.Nonce = forgedAddress(t, r.eng.Address()), nil
				}
				b, _ := hello.MarshalBinary()
				h := stream.Header{Kind: stream.KindConnect, Length: uint32(len(b))}.Bytes()
				if r.sendErr(h[:], b) != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// startFlood starts a process that floods p's server as mode says, naming
// the listener name, and returns once it floods (startFloodProcess). It
// skips t where the server has no tcp: a process no kernel channel
// vouches for reaches a worker over tcp only.
func startFlood(t *testing.T, p *pair, mode, name string) (ended <-chan struct{}) {
	target, err := testUCX.stripSharedMemory(p.server.eng.Address())
	if err != nil || len(target) == 0 {
		t.Skipf("UCX_TLS=%q: a process that no kernel channel vouches for reaches a worker over tcp only, and this run offers no tcp", os.Getenv("UCX_TLS"))
	}
	return startFloodProcess(t, floodModeEnv+"="+mode, floodAddrEnv+"="+hex.EncodeToString(target), floodNameEnv+"="+name)
}

// startFloodProcess starts TestFloodHelper with env and returns once it
// floods; the flood ends when every send of the flooder fails, or when
// the test does. ended is closed when the flooding process has exited.
func startFloodProcess(t *testing.T, env ...string) (ended <-chan struct{}) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestFloodHelper$", "-test.v=false")
	cmd.Env = append(append(os.Environ(), env...), "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	flooding := make(chan bool, 1)
	go func() {
		defer close(done)
		line, _ := bufio.NewReader(out).ReadString('\n')
		flooding <- line == "flooding\n"
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	require.True(t, <-flooding, "the flooding process did not start flooding")
	return done
}

// TestIngressFloodFromProcess: a child process floods the listener's
// worker with frames that carry no data while an honest pair in this
// process times its round trips. The flooder is failed, every honest
// round trip completes, and the honest conn carries on after. The round
// trips made while the flood ran are logged against their quiet value
// (not a pass/fail figure).
func TestIngressFloodFromProcess(t *testing.T) {
	p := newPair(t, Config{})
	c := echoConn(t, p)
	quiet := roundTrips(t, c, 200)

	ended := startFlood(t, p, floodIngress, p.ln.Addr().String())
	accepted := make(chan net.Conn, 1)
	go func() {
		fc, _ := p.ln.Accept()
		accepted <- fc
	}()
	defer func() {
		p.ln.Close()
		if fc := <-accepted; fc != nil {
			fc.Close()
		}
	}()
	start := time.Now()
	during, n := roundTripsWhile(t, c, func() bool {
		return p.server.Stats().PeersFlooded == 0 && time.Since(start) < 20*time.Second
	})
	t.Logf("flood ran %v from its first frame to the verdict; %d honest round trips meanwhile: p50 %v (%.1fx quiet %v)",
		time.Since(start).Round(time.Millisecond), n, during, float64(during)/float64(quiet), quiet)
	require.EqualValues(t, 1, p.server.Stats().PeersFlooded, "the flooding process was not failed within 20 s")
	after := roundTrips(t, c, 200) // the honest conn carries on
	t.Logf("honest round trip p50 after the verdict %v (%.1fx quiet)", after, float64(after)/float64(quiet))
	select {
	case <-ended:
	case <-time.After(15 * time.Second):
		t.Errorf("the flooder still sends 15 s after it was failed")
	}
}

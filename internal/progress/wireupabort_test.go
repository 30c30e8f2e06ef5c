package progress

// UCX 1.13's wireup assertion (ucp_request.c:684): an endpoint that fails
// while its wireup reply is still queued aborts the process. A peer that
// sends its first message and closes at once makes that happen in the
// receiver; nothing of ours runs first (docs/RELIABILITY.md, "Known UCX
// 1.13 hazards"). UCX removed the assertion in 1.14.

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/cucx"
	"github.com/ucxnet/ucxnet/internal/ucxconf"
)

const (
	wireupVanishEnv   = "UCXNET_WIREUP_VANISH" // runs the helper
	wireupSenderEnv   = "UCXNET_WIREUP_SENDER" // the helper's vanishing peer: the address to send to
	wireupDelayEnv    = "UCXNET_WIREUP_DELAY"  // ms between its send and its exit
	wireupAbort       = "ucp_request.c:684"
	wireupVanishPairs = 40
)

// TestWireupVanishHelper is not a test: it is the process of
// TestPeerVanishingRightAfterFirstMessage, and of each peer that vanishes
// on it. Pairs, one after the other: b starts, a process of its own (a)
// sends b its first message and exits 0–4 ms later without closing
// anything; b is left to answer.
func TestWireupVanishHelper(t *testing.T) {
	if to := os.Getenv(wireupSenderEnv); to != "" {
		vanishingSender(t, to)
		return
	}
	if os.Getenv(wireupVanishEnv) == "" {
		t.Skip("helper process for TestPeerVanishingRightAfterFirstMessage; runs only as its child")
	}
	for i := range wireupVanishPairs {
		b := newCollector(t)
		cmd := exec.Command(os.Args[0], "-test.run=^TestWireupVanishHelper$")
		cmd.Env = append(os.Environ(), wireupSenderEnv+"="+hex.EncodeToString(b.eng.Address()),
			fmt.Sprintf("%s=%d", wireupDelayEnv, i%5))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "the vanishing peer:\n%s", out)
		time.Sleep(50 * time.Millisecond) // b's reply meets a's absence
		_ = b.eng.Close(time.Second)
	}
}

// vanishingSender is the peer that vanishes: it sends the engine at the
// hex address to its first message and exits, delay ms later.
func vanishingSender(t *testing.T, to string) {
	addr, err := hex.DecodeString(to)
	require.NoError(t, err)
	delay, err := strconv.Atoi(os.Getenv(wireupDelayEnv))
	require.NoError(t, err)
	a := newCollector(t)
	ep, err := connect(a.eng, addr)
	require.NoError(t, err)
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], 1)
	require.NoError(t, send(a.eng, ep, hdr[:], []byte("first")))
	time.Sleep(time.Duration(delay) * time.Millisecond)
	os.Exit(0)
}

// TestPeerVanishingRightAfterFirstMessage keeps the UCX hazard in view:
// over tcp, a peer that vanishes right after its first message aborts
// the receiver with UCX 1.13 (so the test expects the helper process to
// die of that assertion, and fails once it no longer does: the hazard's
// text and TestChurnNoAbort's allowance are then to go), and leaves it
// running with later releases.
func TestPeerVanishingRightAfterFirstMessage(t *testing.T) {
	if tls, _ := ucxconf.EffectiveTLS(nil); !ucxconf.TCPEnabled(tls) || cucx.Version() == "" {
		t.Skipf("the hazard is UCX's tcp transport's; this run has UCX %q with UCX_TLS=%q", cucx.Version(), tls)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWireupVanishHelper$", "-test.v", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), wireupVanishEnv+"=1", "UCX_TLS=tcp", "GORACE=atexit_sleep_ms=0")
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
		t.Fatalf("the helper did not end within 3 minutes:\n%s", out.String())
	}
	aborted := strings.Contains(out.String(), wireupAbort)
	if strings.HasPrefix(cucx.Version(), "1.13.") {
		require.True(t, aborted, "UCX %s no longer aborts at %s when a peer vanishes right after its first message (%v):\n%s",
			cucx.Version(), wireupAbort, err, out.String())
		t.Logf("UCX %s aborted the receiver at %s, as documented", cucx.Version(), wireupAbort)
		return
	}
	require.NoError(t, err, "UCX %s:\n%s", cucx.Version(), out.String())
}

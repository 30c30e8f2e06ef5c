package progress

// UCX 1.13's wireup assertion (ucp_request.c:684): an endpoint that fails
// while its wireup reply is still queued aborts the process. A peer that
// sends its first message and closes at once makes that happen in the
// receiver; nothing of ours runs first (docs/RELIABILITY.md, "Known UCX
// 1.13 hazards"). UCX removed the assertion in 1.14.

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/cucx"
	"github.com/ucxnet/ucxnet/internal/ucxconf"
)

const (
	wireupVanishEnv   = "UCXNET_WIREUP_VANISH" // runs the helper
	wireupAbort       = "ucp_request.c:684"
	wireupVanishPairs = 40
)

// TestWireupVanishHelper is not a test: it is the process of
// TestPeerVanishingRightAfterFirstMessage. Pairs of engines, one after
// the other: a sends b its first message, then (0–4 ms later) closes its
// endpoint and its engine; b is left to answer.
func TestWireupVanishHelper(t *testing.T) {
	if os.Getenv(wireupVanishEnv) == "" {
		t.Skip("helper process for TestPeerVanishingRightAfterFirstMessage; runs only as its child")
	}
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], 1)
	for i := range wireupVanishPairs {
		a, b := newCollector(t), newCollector(t)
		ep, err := connect(a.eng, b.eng.Address())
		require.NoError(t, err)
		require.NoError(t, send(a.eng, ep, hdr[:], []byte("first")))
		time.Sleep(time.Duration(i%5) * time.Millisecond)
		_ = closeEP(a.eng, ep, true)
		_ = a.eng.Close(time.Second)
		time.Sleep(50 * time.Millisecond) // b's reply meets a's absence
		_ = b.eng.Close(time.Second)
	}
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

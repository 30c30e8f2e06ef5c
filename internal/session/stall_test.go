package session

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/engine/memengine"
	"github.com/ucxnet/ucxnet/internal/stream"
	"github.com/ucxnet/ucxnet/registry"
)

// The stall: a listener that writes at once to the conn it accepted can
// have its WINDOW (Accept's) and its whole first window of DATA reach the
// dialer before its ACCEPT; over UCX's tcp transport that was seen in 1 of
// 20-100 runs of TestStallFirstWindow before the dialer kept that much.

// patterned returns n bytes whose value tells their offset.
func patterned(off, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte((off + i) / 251)
	}
	return b
}

// readStream reads want bytes of patterned data from c into a 256 KiB
// buffer, each Read within a generous hang bound, and checks them; it
// returns the first error.
func readStream(c net.Conn, want int) (int, error) {
	buf := make([]byte, 256<<10)
	got := 0
	for got < want {
		if err := c.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
			return got, err
		}
		n, err := c.Read(buf)
		if n > 0 && !bytes.Equal(buf[:n], patterned(got, n)) {
			return got, fmt.Errorf("bytes %d-%d are not the ones written", got, got+n)
		}
		got += n
		if err != nil {
			return got, err
		}
	}
	return got, nil
}

// writeStream writes patterned data in 64 KiB chunks to c until an error.
func writeStream(c net.Conn) {
	for off := 0; ; off += 64 << 10 {
		if _, err := c.Write(patterned(off, 64<<10)); err != nil {
			c.Close()
			return
		}
	}
}

// heldAccept is a hook on p's network that holds back every ACCEPT (the
// dial's, and the listener's answers to the dial's resent CONNECTs) until
// release, and, until then, does dup to the DATA frames.
type heldAccept struct {
	p              *memPair
	held, released atomic.Bool
}

// holdAccept installs a heldAccept on p's network.
func holdAccept(p *memPair, dup memengine.Action) *heldAccept {
	a := &heldAccept{p: p}
	p.net.SetHook(func(f *memengine.Frame) memengine.Action {
		h, err := stream.DecodeHeader(f.Header)
		switch {
		case err != nil || a.released.Load():
		case h.Kind == stream.KindAccept:
			a.held.Store(true)
			return memengine.HoldBack
		case h.Kind == stream.KindData && a.held.Load():
			return dup
		}
		return memengine.Deliver
	})
	return a
}

// release delivers the ACCEPTs held back, and lets every frame through
// from then on.
func (a *heldAccept) release() {
	a.released.Store(true)
	a.p.net.ReleaseHeld()
}

// dialBehindHeldAccept dials p's listener, whose conn writes patterned
// data without end, with the ACCEPT held back (holdAccept) until the
// listener has sent its first window; it returns the dial's result.
func dialBehindHeldAccept(t *testing.T, p *memPair, held *heldAccept) (net.Conn, error) {
	type res struct {
		c   net.Conn
		err error
	}
	dialed := make(chan res, 1)
	go func() {
		c, err := p.dialer.Dial(Network, p.ln.Addr().String())
		dialed <- res{c, err}
	}()
	s, err := p.ln.Accept()
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	require.Eventually(t, held.held.Load, 10*time.Second, time.Millisecond, "the ACCEPT was never sent")
	go writeStream(s)
	// The listener's whole first window sent, each frame handed to the
	// dialer's engine (memengine queues frames in order): the ACCEPTs
	// released now come after them.
	sc := s.(*testConn)
	require.Eventually(t, func() bool { st := sc.Stats(); return st.SendWindow == 0 && st.Queued == 0 }, 10*time.Second, time.Millisecond,
		"the listener did not send its first window")
	held.release()
	r := <-dialed
	if r.c != nil {
		t.Cleanup(func() { r.c.Close() })
	}
	return r.c, r.err
}

// The listener's WINDOW and its whole first window of DATA (4 MiB, in 64
// 64 KiB frames) overtake its ACCEPT: the dialer keeps them all and the
// stream carries on. Before, the dialer kept 64 frames in all, dropped the
// last DATA frame as a third party's, and the stream waited behind the
// gap for ever (ForeignFrames 1, 63 frames read).
func TestMemStallFirstWindowBeforeAccept(t *testing.T) {
	p := newMemPair(t, Config{})
	held := holdAccept(p, memengine.Deliver)
	c, err := dialBehindHeldAccept(t, p, held)
	require.NoError(t, err)
	n, err := readStream(c, 2*DefaultWindow)
	require.NoError(t, err, "after %d bytes; ForeignFrames %d", n, p.client.Stats().ForeignFrames)
	require.Zero(t, p.client.Stats().ForeignFrames)
}

// More frames from the listener than a dial keeps before its ACCEPT (here
// its first window, each DATA frame delivered twice): the conn fails with
// ECONNRESET, naming why, after the data it kept, rather than stall
// behind the frames it could not keep.
func TestMemEarlyOverflowResets(t *testing.T) {
	p := newMemPair(t, Config{})
	held := holdAccept(p, memengine.Duplicate)
	c, err := dialBehindHeldAccept(t, p, held)
	if err == nil {
		var n int
		n, err = readStream(c, 4*DefaultWindow)
		t.Logf("read %d bytes before %v", n, err)
	}
	require.True(t, errors.Is(err, syscall.ECONNRESET), "%v", err)
	require.ErrorContains(t, err, "before the ACCEPT")
}

// The stall's scenario as a user met it, over UCX's tcp transport, 50
// times in a row: a listener process writes 64 KiB chunks without end to
// each conn it accepts; this process dials it and reads 8 MiB into a 256
// KiB buffer. Each run must carry its bytes (a stall fails the Read after
// the hang bound).
func TestStallFirstWindow(t *testing.T) {
	needUCX(t)
	t.Setenv("UCX_TLS", "tcp")
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v=false")
	cmd.Env = append(os.Environ(), childEnv+"=stall", childModeEnv+"=stream", "UCXNET_REGISTRY=dir:"+dir, "GORACE=atexit_sleep_ms=0")
	startCmd(t, cmd)
	reg, err := registry.NewDir(dir)
	require.NoError(t, err)
	start := time.Now()
	for run := range 50 {
		// A fresh transport each run: a new worker, whose first conn to
		// the listener makes new endpoints (the race is in their wireup).
		tr, err := newUCXTransport(Config{Registry: reg})
		require.NoError(t, err)
		d := Dialer{Transport: tr, Timeout: 10 * time.Second}
		c, err := d.Dial(Network, "stall")
		require.NoError(t, err, "run %d", run)
		n, err := readCount(c, 8<<20)
		require.NoError(t, err, "run %d: after %d bytes; ForeignFrames %d", run, n, tr.Stats().ForeignFrames)
		if run == 0 {
			t.Logf("over %v", c.(*testConn).Transports())
		}
		c.Close()
		tr.Close()
	}
	t.Logf("50 runs in %v", time.Since(start))
}

// readCount reads want bytes from c into a 256 KiB buffer, each Read
// within a generous hang bound.
func readCount(c net.Conn, want int) (int, error) {
	buf := make([]byte, 256<<10)
	got := 0
	for got < want {
		if err := c.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
			return got, err
		}
		n, err := c.Read(buf)
		got += n
		if err != nil {
			return got, err
		}
	}
	return got, nil
}

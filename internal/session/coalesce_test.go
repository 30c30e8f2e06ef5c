package session

// Small writes queued while the engine is busy (coalesce.go), over the
// in-memory engine, whose SetBusy makes it look held and backed up.

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/engine/memengine"
	"github.com/ucxnet/ucxnet/internal/stream"
	"github.com/ucxnet/ucxnet/internal/ucxconf"
	"github.com/ucxnet/ucxnet/registry"
)

// Small writes to a busy engine return at once, go out as a few large
// frames, and arrive exactly; big ones push the queued frames out first.
func TestMemCoalesceSmallWrites(t *testing.T) {
	p := newMemPair(t, Config{})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	before := p.client.Stats()

	const writes, size = 200, 1000
	want := make([]byte, writes*size)
	rand.Read(want)
	p.cEng.SetBusy(true)
	for i := 0; i < writes; i++ {
		n, err := c.Write(want[i*size : (i+1)*size])
		require.NoError(t, err)
		require.Equal(t, size, n)
	}
	// A write too big to queue goes through the engine, after the queue.
	big := make([]byte, 3*coalesceMax)
	rand.Read(big)
	want = append(want, big...)
	_, err := c.Write(big)
	require.NoError(t, err)
	tail := []byte("tail written while busy")
	want = append(want, tail...)
	_, err = c.Write(tail)
	require.NoError(t, err)
	p.cEng.SetBusy(false)

	got := make([]byte, len(want))
	_, err = io.ReadFull(s, got)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "the stream differs")

	st := p.client.Stats()
	queued, frames := st.QueuedWrites-before.QueuedWrites, st.FramesOut-before.FramesOut
	require.Equal(t, uint64(writes+1), queued, "every small write to the busy engine is queued")
	// 200 KB in frames of at most coalesceMax, plus the big write's and
	// the tail's: far fewer frames than writes.
	require.Less(t, frames, uint64(writes/4), "frames sent: %d", frames)
}

// Close after queued writes delivers them before the FIN, and CloseWrite
// likewise: the peer reads everything, then io.EOF.
func TestMemCoalesceCloseDelivers(t *testing.T) {
	for _, half := range []bool{false, true} {
		p := newMemPair(t, Config{})
		c, s := p.conns(t)
		p.cEng.SetBusy(true)
		want := make([]byte, 5000)
		rand.Read(want)
		for i := 0; i < len(want); i += 500 {
			_, err := c.Write(want[i : i+500])
			require.NoError(t, err)
		}
		if half {
			require.NoError(t, c.(*testConn).CloseWrite())
		} else {
			require.NoError(t, c.Close())
		}
		got, err := io.ReadAll(s)
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, got), "half=%v: read %d of %d bytes", half, len(got), len(want))
		p.cEng.SetBusy(false)
		c.Close()
		s.Close()
	}
}

// A reset conn drops what it had queued: nothing of it reaches the peer
// after the RST, and the peer sees ECONNRESET.
func TestMemCoalesceAbortDrops(t *testing.T) {
	p := newMemPair(t, Config{})
	c, s := p.conns(t)
	defer s.Close()
	before := p.server.Stats().BytesIn
	p.cEng.SetBusy(true)
	_, err := c.Write([]byte("queued, then reset"))
	require.NoError(t, err)
	require.NoError(t, c.(*testConn).SetLinger(0))
	require.NoError(t, c.Close())
	p.cEng.SetBusy(false)
	s.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadAll(s)
	require.True(t, errors.Is(err, syscall.ECONNRESET), "%v", err)
	require.Equal(t, before, p.server.Stats().BytesIn, "no data after the RST")
}

// failData makes the network fail the send of every DATA frame whose
// payload contains marker, the endpoint staying healthy (a local send
// failure, as UCX out of memory would be).
func failData(p *memPair, marker string) {
	p.net.SetHook(func(f *memengine.Frame) memengine.Action {
		if h, err := stream.DecodeHeader(f.Header); err == nil && h.Kind == stream.KindData && bytes.Contains(f.Data, []byte(marker)) {
			return memengine.Fail
		}
		return memengine.Deliver
	})
}

// A write whose send fails on this side leaves a gap in the stream that
// the peer would wait on for ever: the conn is reset instead, so the
// peer's Read fails with ECONNRESET (after what arrived before the gap)
// rather than hanging, and the writer's Write fails too.
func TestMemSendFailureResets(t *testing.T) {
	for _, queued := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "queued"}[queued], func(t *testing.T) {
			p := newMemPair(t, Config{KeepAlive: -1})
			c, s := p.conns(t)
			defer c.Close()
			defer s.Close()
			_, err := c.Write([]byte("before;"))
			require.NoError(t, err)
			failData(p, "lost")
			if queued {
				// The engine busy: the write goes into the open frame,
				// whose send (once the engine is free) fails.
				p.cEng.SetBusy(true)
				_, err = c.Write([]byte("lost"))
				require.NoError(t, err, "a queued write is committed")
				p.cEng.SetBusy(false)
			} else {
				_, err = c.Write([]byte("lost"))
				require.True(t, errors.Is(err, syscall.ECONNRESET), "%v", err)
			}
			s.SetReadDeadline(time.Now().Add(5 * time.Second))
			got, err := io.ReadAll(s)
			require.True(t, errors.Is(err, syscall.ECONNRESET), "the peer's Read: %v", err)
			require.Equal(t, "before;", string(got))
			require.Eventually(t, func() bool {
				_, err := c.Write([]byte("after"))
				return errors.Is(err, syscall.ECONNRESET)
			}, 5*time.Second, 10*time.Millisecond, "Write after the failed send")
			require.Positive(t, p.client.Stats().ResetsSent)
		})
	}
}

// A write deadline that passes while the engine is busy does not lose a
// queued write: what Write reported as written arrives.
func TestMemCoalesceDeadline(t *testing.T) {
	p := newMemPair(t, Config{Window: 64 << 10})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	p.cEng.SetBusy(true)
	c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	var written int
	chunk := make([]byte, 1000)
	for {
		n, err := c.Write(chunk)
		written += n
		if err != nil {
			var ne net.Error
			require.True(t, errors.As(err, &ne) && ne.Timeout(), "%v", err)
			break
		}
	}
	p.cEng.SetBusy(false)
	s.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, written)
	_, err := io.ReadFull(s, got)
	require.NoError(t, err, "Write reported %d bytes written", written)
}

// nettest's conformance suite with both engines flipping between busy and
// free all along, so that writes take every way: queued, appended, sent at
// once, pushed out by a full frame, a flush or a FIN.
func TestMemNetTestBusyEngines(t *testing.T) {
	p := newMemPair(t, Config{Window: 256 << 10})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		busy := false
		for {
			select {
			case <-stop:
				p.cEng.SetBusy(false)
				p.srvEng.SetBusy(false)
				return
			case <-time.After(30 * time.Microsecond):
			}
			busy = !busy
			p.cEng.SetBusy(busy)
			p.srvEng.SetBusy(!busy)
		}
	}()
	runNetTest(t, p.pair)
	close(stop)
	<-done
	require.NotZero(t, p.client.Stats().QueuedWrites+p.server.Stats().QueuedWrites, "no write was ever queued")
}

// Small writes while another goroutine holds the engine's worker do not
// wait for it: they are queued, and go out, in order, once the worker is
// given back (the engine's Writable event has the handler send them). A
// write that must take the worker waits for it and goes after them.
func TestMemQueuedWhileWorkerHeld(t *testing.T) {
	p := newMemPair(t, Config{})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	before := p.client.Stats().QueuedWrites
	w := p.cEng.Acquire(true)
	wrote := make(chan error, 1)
	go func() {
		var err error
		for _, m := range []string{"queued ", "while ", "held; "} {
			if _, err = c.Write([]byte(m)); err != nil {
				break
			}
		}
		wrote <- err
	}()
	select {
	case err := <-wrote:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		w.GiveBack()
		t.Fatal("a small write waited for the held worker")
	}
	require.Equal(t, before+3, p.client.Stats().QueuedWrites, "every small write queued")
	big := bytes.Repeat([]byte("b"), 3*coalesceMax)
	go func() { _, err := c.Write(big); wrote <- err }()
	w.GiveBack()
	want := append([]byte("queued while held; "), big...)
	got := make([]byte, len(want))
	s.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := io.ReadFull(s, got)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "the stream differs")
	require.NoError(t, <-wrote)
}

// Many writers of small writes on conns of one worker contend for it:
// each queues its frames for whoever holds the worker, and the holder
// helps with others' frames for one extra round only. Every frame still
// goes out (its writer, the next holder or the engine's Writable event
// sends it), in order on each conn.
func TestMemContendedQueueDrains(t *testing.T) {
	p := newMemPair(t, Config{})
	const conns, writes = 8, 500
	before := p.client.Stats().QueuedWrites
	type pair struct{ c, s net.Conn }
	pairs := make([]pair, conns)
	for i := range pairs {
		c, s := p.conns(t)
		defer c.Close()
		defer s.Close()
		pairs[i] = pair{c, s}
	}
	// A third party takes the worker again and again and holds it for
	// half a millisecond, a long time next to a small write, so that
	// writers find it held and queue; its first hold lasts until every
	// writer has started and one has queued, however the machine
	// schedules them. (It must not ask the Transport anything while it
	// holds the worker: the Transport's lock comes before the worker's.)
	stop := make(chan struct{})
	holder := make(chan struct{})
	held, started := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(holder)
		w := p.cEng.Acquire(true)
		close(held)
		<-started
		// Until a writer found it held (the counter is an atomic: no
		// Transport lock), or a while.
		for deadline := time.Now().Add(5 * time.Second); p.client.stats.queuedWrites.Load() == before && time.Now().Before(deadline); {
			time.Sleep(100 * time.Microsecond)
		}
		w.GiveBack()
		for {
			select {
			case <-stop:
				return
			default:
			}
			w := p.cEng.Acquire(true)
			time.Sleep(500 * time.Microsecond)
			w.GiveBack()
			runtime.Gosched()
		}
	}()
	<-held
	var wg, writing sync.WaitGroup
	writing.Add(conns)
	errs := make(chan error, 2*conns)
	for i := range conns {
		c, s := pairs[i].c, pairs[i].s
		msg := func(j int) []byte { return []byte{byte(i), byte(j), byte(j >> 8), 0xa5, 0x5a, byte(i + j)} }
		wg.Add(2)
		go func() {
			defer wg.Done()
			writing.Done()
			for j := range writes {
				if _, err := c.Write(msg(j)); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			s.SetReadDeadline(time.Now().Add(30 * time.Second))
			got := make([]byte, 6)
			for j := range writes {
				if _, err := io.ReadFull(s, got); err != nil {
					errs <- fmt.Errorf("conn %d, message %d of %d: %w", i, j, writes, err)
					return
				}
				if !bytes.Equal(got, msg(j)) {
					errs <- fmt.Errorf("conn %d, message %d: got % x", i, j, got)
					return
				}
			}
		}()
	}
	writing.Wait()
	close(started)
	wg.Wait()
	close(stop)
	<-holder
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.NotZero(t, p.client.Stats().QueuedWrites-before, "no write was queued: the test did not contend")
}

// A frame opened while the path to the peer is not known yet (UCX still
// wiring the endpoint up) never outgrows the peer's segments once the path
// turns out to be shared memory with small ones: UCX 1.13 aborts a peer
// sent a message larger than its receive segment.
func TestMemQueuedFrameFitsPeerSegments(t *testing.T) {
	p := newMemPair(t, Config{UCX: map[string]string{"MM_SEG_SIZE": "2304"}})
	require.Equal(t, 2048, p.server.shmFrame)
	p.cEng.SetTransports() // not known yet
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	limit := c.(*testConn).peerSegs.Shm
	require.Equal(t, 2048, limit, "the peer's announced shared-memory frame")
	var largest atomic.Int64
	p.net.SetHook(func(f *memengine.Frame) memengine.Action {
		if h, err := stream.DecodeHeader(f.Header); err == nil && h.Kind == stream.KindData && int64(len(f.Data)) > largest.Load() {
			largest.Store(int64(len(f.Data)))
		}
		return memengine.Deliver
	})

	p.cEng.SetBusy(true) // small writes queue into the open frame
	want := make([]byte, 40*500)
	rand.Read(want)
	for i := 0; i < len(want); i += 500 {
		_, err := c.Write(want[i : i+500])
		require.NoError(t, err)
	}
	p.cEng.SetTransports("posix/memory") // the path is learnt: shared memory
	p.cEng.SetBusy(false)
	got := make([]byte, len(want))
	s.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := io.ReadFull(s, got)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "the stream differs")
	require.LessOrEqual(t, largest.Load(), int64(limit), "a DATA frame larger than the peer's shared-memory segment")
}

// A peer that stops draining (SIGSTOP) leaves UCX holding sends to it that
// it cannot start. That backlog is the stopped peer's alone: small writes
// to a live peer are not held back by it (an earlier version looked at the
// worker's backlog and queued them, 100 µs each), and round trips with the
// live peer keep completing.
func TestStoppedPeerDoesNotHoldBackOthers(t *testing.T) {
	needUCX(t)
	dir := t.TempDir()
	mk := func(name, mode string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v=false")
		cmd.Env = append(os.Environ(), childEnv+"="+name, childModeEnv+"="+mode, "UCXNET_REGISTRY=dir:"+dir, "GORACE=atexit_sleep_ms=0")
		return startCmd(t, cmd)
	}
	stopped := mk("stopped", "discard")
	mk("live", "echo")
	reg, err := registry.NewDir(dir)
	require.NoError(t, err)
	// No keepalive: it would take the stopped peer for dead and close its
	// endpoint, which ends the backlog this test is about.
	tr, err := newUCXTransport(Config{Registry: reg, KeepAlive: -1})
	require.NoError(t, err)
	defer tr.Close()
	d := Dialer{Transport: tr, Timeout: 10 * time.Second}
	// Several conns: each may put one receive window (4 MiB) in flight,
	// and over tcp the kernel's socket buffers take a few MiB before UCX
	// has to hold anything.
	var toStopped []net.Conn
	for range 8 {
		c, err := d.Dial(Network, "stopped")
		require.NoError(t, err)
		defer c.Close()
		toStopped = append(toStopped, c)
	}
	live, err := d.Dial(Network, "live")
	require.NoError(t, err)
	defer live.Close()

	require.NoError(t, stopped.Process.Signal(syscall.SIGSTOP))
	defer stopped.Process.Signal(syscall.SIGCONT)
	// Fill the stopped peer's transport and the window: the writer blocks
	// once UCX holds what the peer could not take.
	for _, c := range toStopped {
		go func() {
			buf := make([]byte, 4<<10)
			for {
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
	}
	require.Eventually(t, func() bool { return tr.engineStats().Backlog > 0 }, 10*time.Second, time.Millisecond,
		"UCX never held sends to the stopped peer")

	// 64 B round trips with the live peer: without the bound each would
	// wait for the stopped peer forever. The deadline only catches a hang.
	live.SetDeadline(time.Now().Add(20 * time.Second))
	msg, got := make([]byte, 64), make([]byte, 64)
	for i := range 200 {
		msg[0] = byte(i)
		_, err := live.Write(msg)
		require.NoError(t, err)
		_, err = io.ReadFull(live, got)
		require.NoError(t, err, "round trip %d", i)
		require.Equal(t, msg, got)
	}
	require.NotZero(t, tr.engineStats().Backlog, "the backlog ended during the test")
	buffered := func(c net.Conn) (n uint64) {
		require.NoError(t, c.(*testConn).peer().use(func(ep engine.EP) error {
			n = tr.eng.Stats(ep).Backlog
			return nil
		}))
		return n
	}
	require.NotZero(t, buffered(toStopped[0]), "the backlog is not counted for the stopped peer")
	require.Zero(t, buffered(live), "the stopped peer's backlog is counted for the live one")
}

// connsToDiscarder starts a child process that reads and discards what
// its conns bring, and dials it 8 times from a new transport with cfg
// (and the child's registry): 8 receive windows of 4 MiB, far more than
// any backlog bound. The transport and conns are closed, and the child
// killed, when t ends. It skips t in a build without UCX.
func connsToDiscarder(t *testing.T, cfg Config, remote bool) (*Transport, []net.Conn, *exec.Cmd) {
	t.Helper()
	needUCX(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v=false")
	cmd.Env = append(os.Environ(), childEnv+"=stopped", childModeEnv+"=discard", "UCXNET_REGISTRY=dir:"+dir, "GORACE=atexit_sleep_ms=0")
	if remote {
		// No kernel channel (EnvKChan): stopped, the child is taken for
		// dead by keepalive, as a peer on another host would be.
		if !ucxconf.TCPEnabled(os.Getenv("UCX_TLS")) {
			t.Skipf("UCX_TLS=%q: a peer the kernel does not vouch for is reached over tcp only", os.Getenv("UCX_TLS"))
		}
		cmd.Env = append(cmd.Env, EnvKChan+"=0")
	}
	child := startCmd(t, cmd)
	reg, err := registry.NewDir(dir)
	require.NoError(t, err)
	cfg.Registry = reg
	tr, err := newUCXTransport(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { tr.Close() })
	d := Dialer{Transport: tr, Timeout: 10 * time.Second}
	var conns []net.Conn
	for range 8 {
		c, err := d.Dial(Network, "stopped")
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
	}
	return tr, conns, child
}

// Writes to a peer that drains nothing (here a stopped process) wait once
// UCX holds a bounded backlog of sends it could not start, instead of
// queueing a receive window per conn in C memory: over shared memory small
// writes wait at shmSmallBacklog, over tcp every write at tcpBacklog.
func TestWriteBacklogBounded(t *testing.T) {
	needUCX(t)
	// No keepalive: the stopped peer is not to be taken for dead.
	tr, conns, stopped := connsToDiscarder(t, Config{KeepAlive: -1}, false)
	// The bound, plus what the writers had committed when they last
	// passed it (over sm an open frame each, forced out within 100 µs; over
	// tcp a write each), with room to spare. Without the bounds UCX held
	// the 8 windows (32 MiB, less a socket buffer over tcp).
	var size int
	var limit uint64
	switch k := conns[0].(*testConn).peer().path(tr).Kind; k {
	case PathSharedMemory:
		size, limit = 4<<10, 4<<20 // shmSmallBacklog (1 MiB) and an open frame per conn
	case PathTCP:
		size, limit = 64<<10, 12<<20 // tcpBacklog (8 MiB) and a write per conn
	default:
		t.Skipf("the bounds apply over shared memory and tcp; this run's UCX_TLS=%q carries the conns over %v", os.Getenv("UCX_TLS"), conns[0].(*testConn).Transports())
	}
	require.NoError(t, stopped.Process.Signal(syscall.SIGSTOP))
	defer stopped.Process.Signal(syscall.SIGCONT)
	var wg sync.WaitGroup
	var written atomic.Int64
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetWriteDeadline(time.Now().Add(2 * time.Second))
			buf := make([]byte, size)
			for {
				n, err := c.Write(buf)
				written.Add(int64(n))
				if err != nil {
					require.True(t, errors.Is(err, os.ErrDeadlineExceeded), "%v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	held := conns[0].(*testConn).backlog()
	t.Logf("%d-byte writes: written %d bytes, UCX holds %d for the stopped peer", size, written.Load(), held)
	require.NotZero(t, held, "UCX never held sends to the stopped peer: nothing was bounded")
	require.LessOrEqual(t, held, limit)
}

// A write waiting for UCX to drain its backlog to a peer (drainPeer) ends
// when the conn fails meanwhile, with the conn's error: here keepalive
// takes a stopped peer for dead (one that cannot be found stopped: its
// Hellos name no process). Over tcp keepalive closes the endpoint
// gracefully and the flush the write waits on may never finish; before
// the write heard of the failure, it hung until its deadline.
func TestWriteBacklogEndsOnPeerFailure(t *testing.T) {
	tr, conns, stopped := connsToDiscarder(t, Config{KeepAlive: time.Second}, true) // failed after 10 s
	size := 64 << 10
	switch k := conns[0].(*testConn).peer().path(tr).Kind; k {
	case PathSharedMemory:
		size = 4 << 10 // small writes are the ones bounded over sm
	case PathTCP:
	default:
		t.Skipf("the backlog bounds apply over shared memory and tcp; this run's UCX_TLS=%q carries the conns over %v", os.Getenv("UCX_TLS"), conns[0].(*testConn).Transports())
	}
	require.NoError(t, stopped.Process.Signal(syscall.SIGSTOP))
	defer stopped.Process.Signal(syscall.SIGCONT)
	// The deadline only turns a hang into a failure: keepalive fails the
	// peer after its idle time and 9 intervals.
	const hang = 30 * time.Second
	errs := make(chan error, len(conns))
	for _, c := range conns {
		go func() {
			c.SetWriteDeadline(time.Now().Add(hang))
			buf := make([]byte, size)
			for {
				if _, err := c.Write(buf); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	require.Eventually(t, func() bool { return conns[0].(*testConn).backlog() > 0 }, 10*time.Second, time.Millisecond,
		"UCX never held sends to the stopped peer")
	for range conns {
		err := <-errs
		require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "a write waited out its deadline (%v) after keepalive failed the peer: %v", hang, err)
		require.True(t, errors.Is(err, syscall.ECONNRESET), "%v", err)
	}
	require.NotZero(t, tr.Stats().KeepAliveFailures, "the peer was not failed by keepalive")
}

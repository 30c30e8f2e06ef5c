package session

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ucxnet/ucxnet/registry"
)

// countingRegistry wraps a registry and tracks the names registered through
// it and not yet unregistered, so that a test can tell whether anything
// published an entry it did not withdraw.
type countingRegistry struct {
	registry.Registry
	mu   sync.Mutex
	live map[string]bool
}

func newCountingRegistry() *countingRegistry {
	return &countingRegistry{Registry: registry.NewMemory(), live: map[string]bool{}}
}

func (r *countingRegistry) Register(ctx context.Context, e registry.Entry) error {
	err := r.Registry.Register(ctx, e)
	if err == nil {
		r.mu.Lock()
		r.live[e.Name] = true
		r.mu.Unlock()
	}
	return err
}

func (r *countingRegistry) Unregister(ctx context.Context, name string) error {
	err := r.Registry.Unregister(ctx, name)
	if err == nil {
		r.mu.Lock()
		delete(r.live, name)
		r.mu.Unlock()
	}
	return err
}

func (r *countingRegistry) entries() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.live)
}

// hygieneCycles is how many Dial/Close cycles TestDialCloseHygiene runs
// (about 1 s under -race on 2 cores, so no smaller count for race builds).
const hygieneCycles = 10000

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open fds: %v", err)
	}
	return len(ents)
}

// Many Dial/Close cycles (the accepting side closes too) leave nothing
// behind: no conns in either table, no registry entries, no goroutines, no
// file descriptors.
func TestDialCloseHygiene(t *testing.T) {
	reg := newCountingRegistry()
	p := newPair(t, Config{Registry: reg})
	name := p.ln.Addr().String()

	// Warm up (the endpoint between two workers is created on the first
	// dial between them and shared by all later conns) before taking
	// baselines.
	for range len(p.server.shards) {
		for range len(p.client.shards) {
			c, s := p.conns(t)
			c.Close()
			s.Close()
		}
		p.server.nextAccept.Add(1) // the next round pairs each dialing worker with another listening one
	}
	require.Eventually(t, func() bool {
		return p.client.Stats().OpenConns == 0 && p.server.Stats().OpenConns == 0
	}, 5*time.Second, time.Millisecond)
	regBase := reg.entries()
	fdBase := openFDs(t)
	goBase := runtime.NumGoroutine()
	ignore := goleak.IgnoreCurrent()

	cycles := hygieneCycles
	const par = 4
	start := time.Now()
	var accepted atomic.Int64
	acceptDone := make(chan error, 1)
	go func() {
		var wg sync.WaitGroup
		defer wg.Wait()
		for range cycles {
			s, err := p.ln.Accept()
			if err != nil {
				acceptDone <- err
				return
			}
			accepted.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				// The dialer writes one byte then closes; read it and EOF.
				b := make([]byte, 2)
				n, err := io.ReadFull(s, b[:1])
				if err != nil || n != 1 {
					t.Errorf("accepted conn: read %d: %v", n, err)
				}
				if _, err := s.Read(b); err != io.EOF {
					t.Errorf("accepted conn: want EOF, got %v", err)
				}
				s.Close()
			}()
		}
		acceptDone <- nil
	}()
	var wg sync.WaitGroup
	var next atomic.Int64
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(cycles) && !t.Failed() {
				c, err := p.dialer.Dial(Network, name)
				if err != nil {
					t.Errorf("dial: %v", err)
					return
				}
				if _, err := c.Write([]byte{1}); err != nil {
					t.Errorf("write: %v", err)
				}
				if err := c.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		p.ln.Close()
	}
	require.NoError(t, <-acceptDone)
	elapsed := time.Since(start)
	t.Logf("%d Dial/Close cycles (%d in parallel) in %v (%v each)", cycles, par, elapsed.Round(time.Millisecond), elapsed/time.Duration(cycles))
	require.EqualValues(t, cycles, accepted.Load())

	require.Eventually(t, func() bool {
		return p.client.Stats().OpenConns == 0 && p.server.Stats().OpenConns == 0
	}, 10*time.Second, 5*time.Millisecond, "conns left: client %+v, server %+v", p.client.Stats(), p.server.Stats())
	require.LessOrEqual(t, p.client.Stats().Peers, uint64(len(p.client.shards)*len(p.server.shards)),
		"one endpoint per pair of workers serves every conn to the peer")
	require.Equal(t, regBase, reg.entries(), "registry entries grew")
	require.NoError(t, goleak.Find(ignore), "goroutines leaked (%d at start, %d now)", goBase, runtime.NumGoroutine())
	fdNow := openFDs(t)
	t.Logf("goroutines %d -> %d, fds %d -> %d", goBase, runtime.NumGoroutine(), fdBase, fdNow)
	require.LessOrEqual(t, fdNow, fdBase+4, "file descriptors grew")
	st := p.server.Stats()
	require.Zero(t, st.BadFrames)
	require.Zero(t, st.ProtocolResets)
}

// A listener that does not Accept for a while, under four times its
// backlog of simultaneous dials: each dial succeeds (and its conn is
// accepted later, intact) or is refused with ECONNREFUSED (the backlog is
// full, or on a loaded machine the listener did not answer in time); none
// hangs past its timeout; memory stays bounded.
func TestAcceptOverload(t *testing.T) {
	const backlog = 128
	const dials = 4 * backlog
	const timeout = 5 * time.Second
	p := newPair(t, Config{Backlog: backlog})
	name := p.ln.Addr().String()

	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)

	type result struct {
		c       net.Conn
		err     error
		elapsed time.Duration
	}
	results := make([]result, dials)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range dials {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			d := Dialer{Transport: p.client, Timeout: timeout}
			start := time.Now()
			c, err := d.Dial(Network, name)
			results[i] = result{c, err, time.Since(start)}
			if err == nil {
				// Identify the conn to the acceptor.
				var b [8]byte
				binary.LittleEndian.PutUint64(b[:], uint64(i))
				if _, err := c.Write(b[:]); err != nil {
					results[i].err = err
				}
			}
		}()
	}
	start := time.Now()
	close(gate)
	wg.Wait()
	dialTime := time.Since(start)

	var ok, refused, gaveUp int
	var slowest time.Duration
	for i, r := range results {
		slowest = max(slowest, r.elapsed)
		// A hang detector, not a timing check: a loaded machine may
		// stretch a dial past its timeout by a little, never by this much.
		if r.elapsed > 2*timeout+10*time.Second {
			t.Errorf("dial %d took %v, far past its %v timeout", i, r.elapsed, timeout)
		}
		switch {
		case r.err == nil:
			ok++
		case errors.Is(r.err, syscall.ECONNREFUSED):
			refused++
		case isTimeout(r.err):
			gaveUp++ // its own timeout, on a loaded machine
		default:
			t.Errorf("dial %d: %v (want success, ECONNREFUSED or its timeout)", i, r.err)
		}
	}
	t.Logf("%d simultaneous dials in %v (slowest %v): %d accepted into the backlog of %d, %d refused, %d gave up at their timeout",
		dials, dialTime.Round(time.Millisecond), slowest.Round(time.Millisecond), ok, backlog, refused, gaveUp)
	require.LessOrEqual(t, ok, backlog, "more conns queued than the backlog allows")
	require.Positive(t, refused, "a full backlog refused nothing")

	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	heapDelta := int64(m1.HeapInuse) - int64(m0.HeapInuse)
	t.Logf("heap in use grew by %.1f MiB", float64(heapDelta)/(1<<20))
	require.Less(t, heapDelta, int64(256<<20), "memory not bounded under a dial flood")

	// Now Accept: every successful dial comes out, intact. A dial that
	// gave up (its timeout, or no answer) while its CONNECT was being
	// queued may come out too, with no data: reset by its dialer
	// (ECONNRESET), or closed by it (EOF) when the answer came as it gave
	// up, as Go's dialer closes a TCP conn whose connect completed as its
	// context ended.
	failed := refused + gaveUp
	seen := make(map[uint64]bool)
	resets := 0
	for len(seen) < ok {
		s, err := p.ln.Accept()
		require.NoError(t, err)
		s.SetReadDeadline(time.Now().Add(5 * time.Second))
		var b [8]byte
		_, err = io.ReadFull(s, b[:])
		if (errors.Is(err, syscall.ECONNRESET) || err == io.EOF) && resets < failed {
			resets++
			s.Close()
			continue
		}
		require.NoError(t, err)
		i := binary.LittleEndian.Uint64(b[:])
		require.Less(t, i, uint64(dials))
		require.NoError(t, results[i].err, "accepted conn %d whose dial failed", i)
		require.False(t, seen[i], "conn %d accepted twice", i)
		seen[i] = true
		s.Close()
	}
	require.Len(t, seen, ok)
	if resets > 0 {
		t.Logf("%d conns of dials that gave up came out reset or closed", resets)
	}
	for _, r := range results {
		if r.c != nil {
			r.c.Close()
		}
	}
	// Nothing more is queued but conns of dials that gave up; closing the
	// listener resets them.
	require.LessOrEqual(t, len(p.ln.(*Listener).queue), failed-resets)
	p.ln.Close()
	// A dial that gave up or had no answer stays listed for abandonedTTL
	// (its answer, if one comes, is reset); every other conn is gone.
	require.Eventually(t, func() bool {
		return p.client.Stats().OpenConns <= uint64(failed) && p.server.Stats().OpenConns == 0
	}, 10*time.Second, 5*time.Millisecond, "conns left: client %+v, server %+v", p.client.Stats(), p.server.Stats())
}

// isTimeout reports whether err says a deadline passed, as net.Error's
// Timeout does.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

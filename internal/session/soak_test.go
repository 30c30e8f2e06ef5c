package session

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Soak test: many conns in parallel over one pair of transports, each
// carrying deterministic pseudo-random streams (ChaCha8, seeded per stream)
// in random-sized writes and reads, with deadlines firing mid-transfer and
// CloseWrite / Close at random points from other goroutines. The invariant:
// every byte a Write reported as written is read by the peer in order and
// intact, or a conn reports an error — never corrupted, duplicated or
// invented; and a reader that sees io.EOF has read exactly what the writer's
// Writes reported.
//
// Default: about 6 s. UCXNET_SOAK=long: minutes, more conns, bigger writes.
// UCXNET_SOAK_SEED=N replays a run (the seed is logged).

type soakParams struct {
	dur      time.Duration // how long new sessions are started
	workers  int           // conns in flight at once
	maxWrite int           // largest Write
	maxRead  int           // largest Read buffer
	maxLife  time.Duration // longest session before its stop event
}

func soakSettings() soakParams {
	if os.Getenv("UCXNET_SOAK") == "long" {
		return soakParams{dur: 3 * time.Minute, workers: 32, maxWrite: 8 << 20, maxRead: 4 << 20, maxLife: 5 * time.Second}
	}
	return soakParams{dur: 5 * time.Second, workers: 16, maxWrite: 4 << 20, maxRead: 2 << 20, maxLife: 1500 * time.Millisecond}
}

// soakSize returns a size in [1, max], log-uniformly distributed: mostly
// small, sometimes MiBs.
func soakSize(r *rand.Rand, max int) int {
	e := r.IntN(bits.Len(uint(max)))
	n := 1 << e
	n += r.IntN(n)
	return min(n, max)
}

// stop events of a session
const (
	stopCloseWrite    = iota // the writer stops between writes and calls CloseWrite
	stopCloseWriteNow        // another goroutine calls CloseWrite during a Write
	stopCloseWriter          // another goroutine closes the writing conn during a Write
	stopCloseReader          // another goroutine closes the reading conn
	numStops
)

var stopNames = [numStops]string{"closewrite", "closewrite-concurrent", "close-writer", "close-reader"}

type soakPlan struct {
	bidir     bool // both ends write and read
	deadlines bool // random short read/write deadlines and a slow reader
	stop      int
	after     time.Duration
}

func (p soakPlan) String() string {
	return fmt.Sprintf("bidir=%v deadlines=%v stop=%s after=%v", p.bidir, p.deadlines, stopNames[p.stop], p.after)
}

// soakTotals are the counters of a whole run.
type soakTotals struct {
	sessions, written, verified     atomic.Int64
	timeouts, partial, readTimeouts atomic.Int64
	byStop                          [numStops]atomic.Int64
	eofExact, errEnds               atomic.Int64
}

type writeResult struct {
	written  int64
	err      error // final error; nil after a clean CloseWrite
	timeouts int64
	partial  int64 // timeouts with 0 < n < len
	bad      error // invariant violated
}

type readResult struct {
	read     int64
	err      error // io.EOF or the conn's error
	timeouts int64
	bad      error
}

// soakWrite writes the stream seeded by seed until stop is closed (then
// CloseWrite) or Write fails. After a timeout it resumes with the bytes the
// Write did not report, so the stream stays contiguous.
func soakWrite(c net.Conn, seed [32]byte, r *rand.Rand, prm soakParams, plan soakPlan, stop <-chan struct{}) (res writeResult) {
	gen := rand.NewChaCha8(seed)
	buf := make([]byte, prm.maxWrite)
	var pending []byte
	for {
		select {
		case <-stop:
			c.SetWriteDeadline(time.Time{})
			if err := c.(*testConn).CloseWrite(); err != nil {
				res.err = err
			}
			return res
		default:
		}
		if len(pending) == 0 {
			pending = buf[:soakSize(r, prm.maxWrite)]
			gen.Read(pending)
		}
		if plan.deadlines && r.IntN(3) == 0 {
			c.SetWriteDeadline(time.Now().Add(time.Duration(r.IntN(3000)) * time.Microsecond))
		} else if plan.deadlines {
			c.SetWriteDeadline(time.Time{})
		}
		n, err := c.Write(pending)
		if n < 0 || n > len(pending) {
			res.bad = fmt.Errorf("Write(%d bytes) reported n=%d", len(pending), n)
			return res
		}
		if err == nil && n != len(pending) {
			res.bad = fmt.Errorf("Write(%d bytes) reported n=%d without an error", len(pending), n)
			return res
		}
		res.written += int64(n)
		pending = pending[n:]
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
					res.bad = fmt.Errorf("deadline error is not a net.Error timeout: %v", err)
					return res
				}
				res.timeouts++
				if n > 0 {
					res.partial++
				}
				continue
			}
			res.err = err
			return res
		}
	}
}

// soakRead reads and verifies the stream seeded by seed until EOF or an
// error.
func soakRead(c net.Conn, seed [32]byte, r *rand.Rand, prm soakParams, plan soakPlan) (res readResult) {
	gen := rand.NewChaCha8(seed)
	buf := make([]byte, prm.maxRead)
	want := make([]byte, prm.maxRead)
	for {
		if plan.deadlines {
			if r.IntN(6) == 0 {
				c.SetReadDeadline(time.Now().Add(time.Duration(r.IntN(2000)) * time.Microsecond))
			} else {
				c.SetReadDeadline(time.Time{})
			}
			if r.IntN(12) == 0 { // a slow reader fills the window: writes time out mid-way
				time.Sleep(time.Duration(r.IntN(5000)) * time.Microsecond)
			}
		}
		n, err := c.Read(buf[:soakSize(r, prm.maxRead)])
		if n < 0 || n > len(buf) {
			res.bad = fmt.Errorf("Read reported n=%d", n)
			return res
		}
		if n > 0 {
			gen.Read(want[:n])
			if !bytes.Equal(buf[:n], want[:n]) {
				i := 0
				for buf[i] == want[i] {
					i++
				}
				res.bad = fmt.Errorf("stream corrupted at offset %d (read of %d bytes at offset %d): got %#x, want %#x",
					res.read+int64(i), n, res.read, buf[i:min(i+8, n)], want[i:min(i+8, n)])
				return res
			}
			res.read += int64(n)
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				res.timeouts++
				continue
			}
			res.err = err
			return res
		}
	}
}

// soakRouter hands accepted conns to the worker that dialed them, by the
// dialer's local address (which is the accepted conn's remote address).
type soakRouter struct {
	mu sync.Mutex
	m  map[string]chan net.Conn
}

func (r *soakRouter) ch(key string) chan net.Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := r.m[key]
	if ch == nil {
		ch = make(chan net.Conn, 1)
		r.m[key] = ch
	}
	return ch
}

func (r *soakRouter) forget(key string) {
	r.mu.Lock()
	delete(r.m, key)
	r.mu.Unlock()
}

func TestSoak(t *testing.T) {
	prm := soakSettings()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("UCXNET_SOAK_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = v
	}
	t.Logf("soak: %d conns in parallel for %v, writes up to %d B, seed %d (UCXNET_SOAK_SEED replays)", prm.workers, prm.dur, prm.maxWrite, seed)

	p := newPair(t, Config{Window: 1 << 20, EagerMax: 256 << 10})
	router := &soakRouter{m: map[string]chan net.Conn{}}
	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		for {
			c, err := p.ln.Accept()
			if err != nil {
				return
			}
			router.ch(c.RemoteAddr().String()) <- c
		}
	}()

	var tot soakTotals
	start := time.Now()
	end := start.Add(prm.dur)
	var wg sync.WaitGroup
	for w := range prm.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for s := 0; time.Now().Before(end) && !t.Failed(); s++ {
				if !soakSession(t, p, router, r, prm, end, &tot) {
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	p.ln.Close()
	<-acceptDone

	mib := float64(tot.verified.Load()) / (1 << 20)
	t.Logf("soak: %d sessions in %v: %.1f MiB written, %.1f MiB read and verified (%.1f MiB/s); "+
		"%d write timeouts (%d mid-write, n>0), %d read timeouts; %d streams ended in EOF with exact counts, %d in an error",
		tot.sessions.Load(), elapsed.Round(time.Millisecond), float64(tot.written.Load())/(1<<20), mib, mib/elapsed.Seconds(),
		tot.timeouts.Load(), tot.partial.Load(), tot.readTimeouts.Load(), tot.eofExact.Load(), tot.errEnds.Load())
	t.Logf("soak: stop events: closewrite %d, closewrite-concurrent %d, close-writer %d, close-reader %d",
		tot.byStop[0].Load(), tot.byStop[1].Load(), tot.byStop[2].Load(), tot.byStop[3].Load())
	if t.Failed() {
		return
	}
	require.Greater(t, tot.partial.Load(), int64(0), "no write deadline fired mid-write: the soak did not exercise partial writes")

	// Every conn was closed on both sides: both conn tables drain.
	for _, tr := range []*Transport{p.client, p.server} {
		require.Eventually(t, func() bool { return tr.Stats().OpenConns == 0 }, 10*time.Second, 5*time.Millisecond,
			"conns left in the table after every conn was closed: %+v", tr.Stats())
		st := tr.Stats()
		require.Zero(t, st.BadFrames, "bad frames between two ucxnet transports")
		require.Zero(t, st.ProtocolResets, "protocol resets between two ucxnet transports")
	}
}

// soakSession runs one conn through a random plan and checks the
// invariants. It returns false if the test should stop.
func soakSession(t *testing.T, p *pair, router *soakRouter, r *rand.Rand, prm soakParams, end time.Time, tot *soakTotals) bool {
	plan := soakPlan{
		bidir:     r.IntN(3) == 0,
		deadlines: r.IntN(2) == 0,
		stop:      r.IntN(numStops),
		after:     time.Duration(r.Int64N(int64(prm.maxLife))),
	}
	plan.after = max(min(plan.after, time.Until(end)), time.Millisecond)

	c, err := p.dialer.Dial(Network, p.ln.Addr().String())
	if err != nil {
		t.Errorf("dial: %v", err)
		return false
	}
	key := c.LocalAddr().String()
	var s net.Conn
	select {
	case s = <-router.ch(key):
		router.forget(key)
	case <-time.After(10 * time.Second):
		t.Errorf("dialed conn %s was never accepted", key)
		c.Close()
		return false
	}
	defer c.Close()
	defer s.Close()
	tot.sessions.Add(1)
	tot.byStop[plan.stop].Add(1)

	// Streams: 0 is c -> s; 1 is s -> c (bidir only).
	type stream struct {
		w, rd  net.Conn
		seed   [32]byte
		stop   chan struct{}
		wres   writeResult
		rres   readResult
		wdone  chan struct{}
		rdone  chan struct{}
		wr, rr *rand.Rand
	}
	mk := func(w, rd net.Conn) *stream {
		st := &stream{w: w, rd: rd, stop: make(chan struct{}), wdone: make(chan struct{}), rdone: make(chan struct{})}
		binary.LittleEndian.PutUint64(st.seed[:], r.Uint64())
		binary.LittleEndian.PutUint64(st.seed[8:], r.Uint64())
		st.wr = rand.New(rand.NewPCG(r.Uint64(), r.Uint64()))
		st.rr = rand.New(rand.NewPCG(r.Uint64(), r.Uint64()))
		return st
	}
	streams := []*stream{mk(c, s)}
	if plan.bidir {
		streams = append(streams, mk(s, c))
	}
	for _, st := range streams {
		go func() {
			defer close(st.wdone)
			st.wres = soakWrite(st.w, st.seed, st.wr, prm, plan, st.stop)
		}()
		go func() {
			defer close(st.rdone)
			st.rres = soakRead(st.rd, st.seed, st.rr, prm, plan)
		}()
	}

	// The stop event, from this goroutine while the streams run.
	time.Sleep(plan.after)
	writerConn, readerConn := c, s
	switch plan.stop {
	case stopCloseWrite:
		for _, st := range streams {
			close(st.stop)
		}
	case stopCloseWriteNow:
		for _, st := range streams {
			go st.w.(*testConn).CloseWrite()
		}
	case stopCloseWriter:
		writerConn.Close()
	case stopCloseReader:
		readerConn.Close()
	}

	// Nothing may hang after the stop event: every goroutine ends within a
	// bound, else the conns are closed to unblock them and the test fails.
	hang := time.AfterFunc(20*time.Second, func() {
		t.Errorf("session hung 20 s after its stop event: %v", plan)
		c.Close()
		s.Close()
	})
	for _, st := range streams {
		<-st.wdone
		<-st.rdone
	}
	hang.Stop()

	for i, st := range streams {
		w, rd := st.wres, st.rres
		tot.written.Add(w.written)
		tot.verified.Add(rd.read)
		tot.timeouts.Add(w.timeouts)
		tot.partial.Add(w.partial)
		tot.readTimeouts.Add(rd.timeouts)
		where := fmt.Sprintf("stream %d of %v", i, plan)
		if w.bad != nil {
			t.Errorf("%s: writer: %v", where, w.bad)
		}
		if rd.bad != nil {
			t.Errorf("%s: reader: %v", where, rd.bad)
		}
		if rd.read > w.written {
			t.Errorf("%s: read %d bytes, more than the %d the writer's Writes reported (duplicated or invented data)", where, rd.read, w.written)
		}
		if rd.err == io.EOF {
			tot.eofExact.Add(1)
			if rd.read != w.written {
				t.Errorf("%s: reader got EOF after %d bytes, but the writer's Writes reported %d", where, rd.read, w.written)
			}
		} else {
			tot.errEnds.Add(1)
		}
		// Which errors each side may see.
		okW := func(err error) bool {
			return err == nil || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
		}
		okR := func(err error) bool {
			return err == io.EOF || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET)
		}
		if !okW(w.err) {
			t.Errorf("%s: writer ended with unexpected error %v", where, w.err)
		}
		if !okR(rd.err) {
			t.Errorf("%s: reader ended with unexpected error %v", where, rd.err)
		}
		// Where nothing aborted the stream, it must end in a clean EOF.
		clean := plan.stop == stopCloseWrite || plan.stop == stopCloseWriteNow || (plan.stop == stopCloseWriter && !plan.bidir)
		if clean {
			if rd.err != io.EOF {
				t.Errorf("%s: reader ended with %v, want io.EOF after %d bytes (read %d)", where, rd.err, w.written, rd.read)
			}
			switch plan.stop {
			case stopCloseWrite:
				if w.err != nil {
					t.Errorf("%s: writer: CloseWrite: %v", where, w.err)
				}
			case stopCloseWriteNow:
				if w.err != nil && !errors.Is(w.err, syscall.EPIPE) {
					t.Errorf("%s: writer after a concurrent CloseWrite: %v, want EPIPE", where, w.err)
				}
			case stopCloseWriter:
				if !errors.Is(w.err, net.ErrClosed) {
					t.Errorf("%s: writer after a concurrent Close: %v, want net.ErrClosed", where, w.err)
				}
			}
		}
	}
	return !t.Failed()
}

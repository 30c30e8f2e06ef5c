package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// pingPong times 64 B round trips to the echo server for b.dur, after a
// warm-up, and returns the p50 and p99.
func (b *benchTransport) pingPong(ctx context.Context) (p50, p99 time.Duration, err error) {
	c, err := b.dial(ctx, svcEcho)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(b.dur + 30*time.Second))
	msg := make([]byte, benchPingSize)
	buf := make([]byte, benchPingSize)
	one := func() error {
		if _, err := c.Write(msg); err != nil {
			return err
		}
		_, err := io.ReadFull(c, buf)
		return err
	}
	warm := time.Now().Add(min(b.dur/10, 100*time.Millisecond))
	for i := 0; i < 100 || time.Now().Before(warm); i++ {
		if err := one(); err != nil {
			return 0, 0, err
		}
	}
	lat := make([]time.Duration, 0, 1<<16)
	end := time.Now().Add(b.dur)
	for {
		s := time.Now()
		if err := one(); err != nil {
			return 0, 0, err
		}
		e := time.Now()
		lat = append(lat, e.Sub(s))
		if e.After(end) || ctx.Err() != nil {
			break
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	return percentile(lat, 50), percentile(lat, 99), nil
}

// pingPongConns runs 64 B ping-pongs on conns echo conns at once for
// b.dur, after a warm-up, and returns the aggregate round trips per second.
func (b *benchTransport) pingPongConns(ctx context.Context, conns int) (float64, error) {
	cs, err := b.dialN(ctx, svcEcho, conns)
	defer closeAll(cs)
	if err != nil {
		return 0, err
	}
	var (
		we    workerErrs
		count atomic.Int64
		wg    sync.WaitGroup
	)
	run := func(c net.Conn, warm int) {
		defer wg.Done()
		msg := make([]byte, benchPingSize)
		buf := make([]byte, benchPingSize)
		var n int64
		for i := 0; warm > 0 && i < warm || warm == 0 && !we.stop.Load(); i++ {
			if _, err := c.Write(msg); err != nil {
				we.fail(err)
				return
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				we.fail(err)
				return
			}
			n++
		}
		if warm == 0 {
			count.Add(n)
		}
	}
	for _, c := range cs { // warm-up
		wg.Add(1)
		go run(c, 100)
	}
	wg.Wait()
	if err := we.err(); err != nil {
		return 0, err
	}
	return we.rateFor(ctx, b.dur, &count, func() {
		for _, c := range cs {
			wg.Add(1)
			go run(c, 0)
		}
		wg.Wait()
	})
}

// closeWriter is a conn that can shut down its writing side.
type closeWriter interface {
	CloseWrite() error
}

// stream writes size-byte writes over conns sink conns for b.dur, shuts
// down writing and waits for every conn's acknowledged byte count. It
// returns the bytes delivered and the time from the first write to the
// last acknowledgement.
func (b *benchTransport) stream(ctx context.Context, size, conns int) (int64, time.Duration, error) {
	cs, err := b.dialN(ctx, svcSink, conns)
	defer closeAll(cs)
	if err != nil {
		return 0, 0, err
	}
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i)
	}
	var (
		we    workerErrs
		total atomic.Int64
		wg    sync.WaitGroup
	)
	start := time.Now()
	timer := time.AfterFunc(b.dur, func() { we.stop.Store(true) })
	defer timer.Stop()
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var n int64
			for !we.stop.Load() {
				m, err := c.Write(buf)
				n += int64(m)
				if err != nil {
					we.fail(err)
					return
				}
			}
			cw, ok := c.(closeWriter)
			if !ok {
				we.fail(fmt.Errorf("%T has no CloseWrite", c))
				return
			}
			if err := cw.CloseWrite(); err != nil {
				we.fail(err)
				return
			}
			var ack [8]byte
			if _, err := io.ReadFull(c, ack[:]); err != nil {
				we.fail(fmt.Errorf("reading the acknowledgement: %w", err))
				return
			}
			if got := binary.BigEndian.Uint64(ack[:]); got != uint64(n) {
				we.fail(fmt.Errorf("server acknowledged %d bytes, %d were written", got, n))
				return
			}
			total.Add(n)
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if err := we.err(); err != nil {
		return 0, 0, err
	}
	return total.Load(), el, ctx.Err()
}

// http measures keep-alive requests/s with clients concurrent clients.
func (b *benchTransport) http(ctx context.Context, clients int) (float64, error) {
	addr := b.addrs[svcHTTP]
	url := "http://" + addr + "/"
	if b.name == "unix" {
		url = "http://unix/"
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return b.dial(ctx, svcHTTP)
		},
		MaxIdleConns:        2 * benchHTTPHigh,
		MaxIdleConnsPerHost: 2 * benchHTTPHigh,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: b.dur + 30*time.Second}
	get := func(buf []byte) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, err = io.CopyBuffer(io.Discard, struct{ io.Reader }{resp.Body}, buf)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %s", resp.Status)
		}
		return err
	}
	var (
		we    workerErrs
		count atomic.Int64
	)
	worker := func(warmup int, wg *sync.WaitGroup) {
		defer wg.Done()
		buf := make([]byte, 4<<10)
		for i := 0; i < warmup; i++ {
			if err := get(buf); err != nil {
				we.fail(err)
				return
			}
		}
		if warmup > 0 {
			return
		}
		for !we.stop.Load() {
			if err := get(buf); err != nil {
				we.fail(err)
				return
			}
			count.Add(1)
		}
	}
	// Warm-up: every client opens its conn.
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go worker(20, &wg)
	}
	wg.Wait()
	if err := we.err(); err != nil {
		return 0, err
	}
	return we.rateFor(ctx, b.dur, &count, func() {
		for range clients {
			wg.Add(1)
			go worker(0, &wg)
		}
		wg.Wait()
	})
}

// dialN dials n conns to svc, each with a deadline past the measurement;
// on error it returns the conns dialed so far with it.
func (b *benchTransport) dialN(ctx context.Context, svc string, n int) ([]net.Conn, error) {
	cs := make([]net.Conn, 0, n)
	for range n {
		c, err := b.dial(ctx, svc)
		if err != nil {
			return cs, err
		}
		c.SetDeadline(time.Now().Add(b.dur + 30*time.Second))
		cs = append(cs, c)
	}
	return cs, nil
}

// closeAll closes every conn of cs.
func closeAll(cs []net.Conn) {
	for _, c := range cs {
		c.Close()
	}
}

// workerErrs keeps the first error of a workload's concurrent workers and
// tells the others to stop.
type workerErrs struct {
	stop  atomic.Bool
	mu    sync.Mutex
	first error
}

// fail records err (if it is the first) and stops the workers.
func (w *workerErrs) fail(err error) {
	w.mu.Lock()
	if w.first == nil {
		w.first = err
	}
	w.mu.Unlock()
	w.stop.Store(true)
}

// err returns the first error recorded.
func (w *workerErrs) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first
}

// rateFor runs the workers (run returns once they have stopped), telling
// them to stop after d, and returns what they counted per second, or the
// first error one recorded, or ctx's.
func (w *workerErrs) rateFor(ctx context.Context, d time.Duration, count *atomic.Int64, run func()) (float64, error) {
	start := time.Now()
	timer := time.AfterFunc(d, func() { w.stop.Store(true) })
	defer timer.Stop()
	run()
	el := time.Since(start)
	if err := w.err(); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return float64(count.Load()) / el.Seconds(), nil
}

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ucxnet/ucxnet/ucxnet"
)

// demoClient is the client side of the demo: net/http over ucxnet and over
// TCP loopback to the demo server, and the ucxnet conns it dialed, so that
// it can tell which UCX transports carry them.
type demoClient struct {
	w              io.Writer
	ucx, tcp       *http.Client
	ucxURL, tcpURL string

	mu    sync.Mutex
	conns []*ucxnet.Conn
}

func newDemoClient(w io.Writer, t *ucxnet.Transport, name, tcpAddr string) *demoClient {
	c := &demoClient{w: w, ucxURL: "http://" + name, tcpURL: "http://" + tcpAddr}
	d := &ucxnet.Dialer{Transport: t, Timeout: 10 * time.Second}
	c.ucx = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			c.mu.Lock()
			c.conns = append(c.conns, conn.(*ucxnet.Conn))
			c.mu.Unlock()
			return conn, nil
		},
		ForceAttemptHTTP2:   false,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 4,
	}}
	c.tcp = &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		ForceAttemptHTTP2:   false,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 4,
	}}
	return c
}

// close closes both clients' idle conns.
func (c *demoClient) close() {
	c.ucx.CloseIdleConnections()
	c.tcp.CloseIdleConnections()
}

// carried returns how many ucxnet conns the client dialed and the UCX
// transports of the last one.
func (c *demoClient) carried() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.conns) == 0 {
		return 0, nil
	}
	return len(c.conns), c.conns[len(c.conns)-1].Transports()
}

// hello GETs a small answer over ucxnet and prints it, with the UCX
// transports and lane of the conn on both sides.
func (c *demoClient) hello(ctx context.Context) error {
	resp, err := doRequest(ctx, c.ucx, http.MethodGet, c.ucxURL+pathHello, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", pathHello, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s %v", pathHello, resp.Status, err)
	}
	fmt.Fprintf(c.w, "GET %s%s -> %s %q\n", c.ucxURL, pathHello, resp.Status, strings.TrimSpace(string(body)))
	c.mu.Lock()
	first := c.conns[0]
	c.mu.Unlock()
	fmt.Fprintf(c.w, "  client conn %s -> %s: UCX transports %s\n", first.LocalAddr(), first.RemoteAddr(), fmtTransports(first.Transports()))
	lane, why := first.Lane()
	fmt.Fprintf(c.w, "  lane: %s (%s)\n", lane, why)
	fmt.Fprintf(c.w, "  server conn (as the server reports it): UCX transports %s\n", fmtTransports(strings.Fields(resp.Header.Get(headerTransports))))
	return nil
}

// echo POSTs mib MiB of random bytes over ucxnet and checks, by SHA-256,
// that the answer is the same bytes.
func (c *demoClient) echo(ctx context.Context, mib int) error {
	payload := make([]byte, mib<<20)
	_, _ = rand.Read(payload)
	want := sha256.Sum256(payload)
	start := time.Now()
	resp, err := doRequest(ctx, c.ucx, http.MethodPost, c.ucxURL+pathEcho, bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("POST %s: %w", pathEcho, err)
	}
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s %v", pathEcho, resp.Status, err)
	}
	el := time.Since(start)
	var got [32]byte
	h.Sum(got[:0])
	if got != want || n != int64(len(payload)) {
		return fmt.Errorf("POST %s: echoed %d bytes with sha256 %x, sent %d bytes with sha256 %x", pathEcho, n, got[:8], len(payload), want[:8])
	}
	fmt.Fprintf(c.w, "POST %s%s, %d MiB -> %s, %d bytes echoed in %v, sha256 ok (%x...)\n",
		c.ucxURL, pathEcho, mib, resp.Status, n, el.Round(time.Millisecond), want[:8])
	return nil
}

// demoResult is what compare measures over one transport.
type demoResult struct {
	p50, p99 time.Duration // 64 B round trips
	n        int           // round trips timed
	mbps     float64       // the better of two downloads
}

// compare times round trips and downloads over ucxnet and over TCP
// loopback and prints them side by side.
func (c *demoClient) compare(ctx context.Context, o demoOptions) error {
	fmt.Fprintf(c.w, "\nTiming (%d B round trips: up to %d or %v; download: %d MiB, best of 2)...\n", 64, o.rounds, o.rrTime, o.downloadMiB)
	ur, err := measureDemo(ctx, c.ucx, c.ucxURL, o)
	if err != nil {
		return fmt.Errorf("ucxnet: %w", err)
	}
	tr, err := measureDemo(ctx, c.tcp, c.tcpURL, o)
	if err != nil {
		return fmt.Errorf("tcp loopback: %w", err)
	}
	w := c.w
	fmt.Fprintf(w, "\n%-22s %16s %16s %16s\n", "", "ucxnet HTTP", "Go TCP HTTP", "ucxnet vs TCP")
	fmt.Fprintf(w, "%-22s %16s %16s %16s\n", "64 B round trip p50", fmtDur(ur.p50), fmtDur(tr.p50), ratio(float64(tr.p50), float64(ur.p50)))
	fmt.Fprintf(w, "%-22s %16s %16s %16s\n", "64 B round trip p99", fmtDur(ur.p99), fmtDur(tr.p99), ratio(float64(tr.p99), float64(ur.p99)))
	fmt.Fprintf(w, "%-22s %16s %16s %16s\n", fmt.Sprintf("%d MiB download", o.downloadMiB),
		fmt.Sprintf("%.0f MB/s", ur.mbps), fmt.Sprintf("%.0f MB/s", tr.mbps), ratio(ur.mbps, tr.mbps))
	fmt.Fprintf(w, "(round trips timed: %d over ucxnet, %d over TCP; ratio >1x means ucxnet is faster)\n", ur.n, tr.n)
	return nil
}

// measureDemo times round trips and two downloads with client hc against
// the server at base.
func measureDemo(ctx context.Context, hc *http.Client, base string, o demoOptions) (r demoResult, err error) {
	lat, err := roundTrips(ctx, hc, base+pathRR, o.rounds, o.rrTime)
	if err != nil {
		return r, err
	}
	r.n = len(lat)
	r.p50, r.p99 = percentile(lat, 50), percentile(lat, 99)
	for range 2 {
		bps, err := download(ctx, hc, base+pathDownload, int64(o.downloadMiB)<<20)
		if err != nil {
			return r, err
		}
		r.mbps = max(r.mbps, bps/1e6)
	}
	return r, nil
}

func doRequest(ctx context.Context, c *http.Client, method, url string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, err
	}
	return c.Do(req)
}

// roundTrips POSTs 64 B to url and reads the 64 B answer, n times or for
// at most d, after a short warm-up, and returns each round trip's time.
func roundTrips(ctx context.Context, c *http.Client, url string, n int, d time.Duration) ([]time.Duration, error) {
	body := make([]byte, 64)
	buf := make([]byte, 256)
	one := func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		m, err := io.ReadFull(resp.Body, buf[:64])
		resp.Body.Close()
		if err != nil || m != 64 {
			return fmt.Errorf("round trip: read %d bytes: %v", m, err)
		}
		return nil
	}
	for range min(n, 50) { // warm-up: conn set up, caches warm
		if err := one(); err != nil {
			return nil, err
		}
	}
	lat := make([]time.Duration, 0, n)
	deadline := time.Now().Add(d)
	for i := 0; i < n; i++ {
		s := time.Now()
		if err := one(); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(s))
		if i%64 == 0 && time.Now().After(deadline) {
			break
		}
	}
	return lat, nil
}

// download GETs size bytes and returns the rate in bytes per second.
func download(ctx context.Context, c *http.Client, url string, size int64) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s?n=%d", url, size), nil)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	buf := make([]byte, 256<<10)
	n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, resp.Body, buf)
	if err != nil {
		return 0, err
	}
	if n != size {
		return 0, fmt.Errorf("download: got %d bytes, want %d", n, size)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}

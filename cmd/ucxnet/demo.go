package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ucxnet/ucxnet/registry"
	"github.com/ucxnet/ucxnet/ucxnet"
)

var demoCmd = &command{
	Name:  "demo",
	Short: "HTTP over ucxnet between two processes, compared with TCP loopback",
	Long: `Demo starts an HTTP server in a child process, listening both on ucxnet and
on TCP 127.0.0.1, and talks to it from this process with net/http over
ucxnet: a GET, an 8 MiB POST echoed back (checked by SHA-256), then 64 B
request/response round trips and a large download over ucxnet and over
TCP loopback, side by side. Both processes use a private registry in a
temporary directory. UCX_TLS picks the UCX transports (e.g. UCX_TLS=sm or
UCX_TLS=tcp); unset, UCX picks the best it finds. Both processes print the
TCP addresses they listen on: UCX's tcp transport listens on every
interface it may use (--net-devices, i.e. UCX_NET_DEVICES, restricts it).`,
	Setup: func(fs *flag.FlagSet) func(context.Context, *stdio, []string) error {
		var o demoOptions
		fs.IntVar(&o.rounds, "rr", 2000, "64 B round trips to time per transport (also bounded by --rr-time)")
		fs.DurationVar(&o.rrTime, "rr-time", 2*time.Second, "most `time` spent on round trips per transport")
		fs.IntVar(&o.downloadMiB, "download", 64, "download size in `MiB` per transport")
		fs.IntVar(&o.echoMiB, "echo", 8, "POST body size in `MiB` echoed back")
		fs.StringVar(&o.netDevices, "net-devices", "", netDevicesUsage)
		fs.DurationVar(&o.hold, "hold", 0, "at the end, keep both processes and their conns open this `long` (Ctrl-C ends it), for `ucxnet ls` in another terminal")
		return func(ctx context.Context, sio *stdio, args []string) error {
			if len(args) != 0 {
				return usagef("demo takes no arguments")
			}
			if o.rounds < 1 || o.downloadMiB < 1 || o.echoMiB < 1 {
				return usagef("--rr, --download and --echo must be positive")
			}
			return runDemo(ctx, sio, o)
		}
	},
}

type demoOptions struct {
	rounds      int
	rrTime      time.Duration
	downloadMiB int
	echoMiB     int
	netDevices  string
	hold        time.Duration
}

func runDemo(ctx context.Context, sio *stdio, o demoOptions) (err error) {
	w := sio.Out
	t0 := time.Now()
	fmt.Fprintf(w, "ucxnet demo: HTTP/1.1 over UCX active messages between two processes\n")
	printUCXLibrary(w)
	if tls, ok := os.LookupEnv("UCX_TLS"); ok {
		fmt.Fprintf(w, "UCX_TLS=%s\n", tls)
	} else {
		fmt.Fprintf(w, "UCX_TLS not set: UCX picks from every transport it finds\n")
	}
	if defs := ucxnet.EffectiveUCXDefaults(); len(defs) > 0 {
		var kv []string
		for _, k := range sortedKeys(defs) {
			kv = append(kv, k+"="+defs[k])
		}
		fmt.Fprintf(w, "ucxnet defaults applied: %s\n", strings.Join(kv, " "))
	}

	dir, spec, reg, err := privateRegistry("ucxnet-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	name := "demo-" + registry.UniqueName()

	child, tcpAddr, err := startDemoServer(ctx, sio, spec, name, o.netDevices)
	if err != nil {
		return err
	}
	defer child.stop()
	fmt.Fprintf(w, "server: pid %d, ucxnet listener %q, TCP listener %s (registry %s)\n\n",
		child.cmd.Process.Pid, name, tcpAddr, spec)

	t, err := newTransport(o.netDevices, reg)
	if err != nil {
		return err
	}
	defer t.Close()
	fmt.Fprintf(w, "this process (pid %d) listens on TCP: %s\n", os.Getpid(), listeningSummary())

	// The ucxnet client: net/http with DialContext from ucxnet, wrapped to
	// keep the conns so that we can ask which UCX transports carry them.
	var (
		mu    sync.Mutex
		conns []*ucxnet.Conn
	)
	d := &ucxnet.Dialer{Transport: t, Timeout: 10 * time.Second}
	ucxClient := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			conns = append(conns, c.(*ucxnet.Conn))
			mu.Unlock()
			return c, nil
		},
		ForceAttemptHTTP2:   false,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 4,
	}}
	defer ucxClient.CloseIdleConnections()
	tcpClient := &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		ForceAttemptHTTP2:   false,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 4,
	}}
	defer tcpClient.CloseIdleConnections()
	ucxURL := "http://" + name
	tcpURL := "http://" + tcpAddr

	// 1. A small GET.
	resp, err := doRequest(ctx, ucxClient, http.MethodGet, ucxURL+pathHello, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", pathHello, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s %v", pathHello, resp.Status, err)
	}
	fmt.Fprintf(w, "GET %s%s -> %s %q\n", ucxURL, pathHello, resp.Status, strings.TrimSpace(string(body)))
	mu.Lock()
	first := conns[0]
	mu.Unlock()
	fmt.Fprintf(w, "  client conn %s -> %s: UCX transports %s\n", first.LocalAddr(), first.RemoteAddr(), fmtTransports(first.Transports()))
	lane, why := first.Lane()
	fmt.Fprintf(w, "  lane: %s (%s)\n", lane, why)
	fmt.Fprintf(w, "  server conn (as the server reports it): UCX transports %s\n", fmtTransports(strings.Fields(resp.Header.Get(headerTransports))))

	// 2. A large POST echoed back.
	payload := make([]byte, o.echoMiB<<20)
	_, _ = rand.Read(payload)
	want := sha256.Sum256(payload)
	start := time.Now()
	resp, err = doRequest(ctx, ucxClient, http.MethodPost, ucxURL+pathEcho, bytes.NewReader(payload))
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
	fmt.Fprintf(w, "POST %s%s, %d MiB -> %s, %d bytes echoed in %v, sha256 ok (%x...)\n",
		ucxURL, pathEcho, o.echoMiB, resp.Status, n, el.Round(time.Millisecond), want[:8])

	// 3. Round trips and a download over each transport.
	fmt.Fprintf(w, "\nTiming (%d B round trips: up to %d or %v; download: %d MiB, best of 2)...\n", 64, o.rounds, o.rrTime, o.downloadMiB)
	type result struct {
		p50, p99 time.Duration
		n        int
		mbps     float64
	}
	measure := func(c *http.Client, base string) (r result, err error) {
		lat, err := roundTrips(ctx, c, base+pathRR, o.rounds, o.rrTime)
		if err != nil {
			return r, err
		}
		r.n = len(lat)
		r.p50, r.p99 = percentile(lat, 50), percentile(lat, 99)
		for range 2 {
			bps, err := download(ctx, c, base+pathDownload, int64(o.downloadMiB)<<20)
			if err != nil {
				return r, err
			}
			r.mbps = max(r.mbps, bps/1e6)
		}
		return r, nil
	}
	ur, err := measure(ucxClient, ucxURL)
	if err != nil {
		return fmt.Errorf("ucxnet: %w", err)
	}
	tr, err := measure(tcpClient, tcpURL)
	if err != nil {
		return fmt.Errorf("tcp loopback: %w", err)
	}

	mu.Lock()
	nconns := len(conns)
	tl := conns[len(conns)-1].Transports()
	mu.Unlock()
	fmt.Fprintf(w, "\n%-22s %16s %16s %16s\n", "", "ucxnet HTTP", "Go TCP HTTP", "ucxnet vs TCP")
	fmt.Fprintf(w, "%-22s %16s %16s %16s\n", "64 B round trip p50", fmtDur(ur.p50), fmtDur(tr.p50), ratio(float64(tr.p50), float64(ur.p50)))
	fmt.Fprintf(w, "%-22s %16s %16s %16s\n", "64 B round trip p99", fmtDur(ur.p99), fmtDur(tr.p99), ratio(float64(tr.p99), float64(ur.p99)))
	fmt.Fprintf(w, "%-22s %16s %16s %16s\n", fmt.Sprintf("%d MiB download", o.downloadMiB),
		fmt.Sprintf("%.0f MB/s", ur.mbps), fmt.Sprintf("%.0f MB/s", tr.mbps), ratio(ur.mbps, tr.mbps))
	fmt.Fprintf(w, "(round trips timed: %d over ucxnet, %d over TCP; ratio >1x means ucxnet is faster)\n", ur.n, tr.n)

	st := t.Stats()
	fmt.Fprintf(w, "\nucxnet carried all of it over UCX transports %s, in %d conn(s)\n", fmtTransports(tl), nconns)
	fmt.Fprintf(w, "client transport: %d frames / %d bytes out, %d frames / %d bytes in, %d resets, %d peer failures\n",
		st.FramesOut, st.BytesOut, st.FramesIn, st.BytesIn, st.ResetsReceived+st.ResetsSent, st.PeerFailures)
	fmt.Fprintf(w, "demo finished in %v\n", time.Since(t0).Round(10*time.Millisecond))
	if o.hold <= 0 {
		fmt.Fprintf(w, "(to see both processes' conns live: ucxnet demo --hold 30s, and ucxnet ls in another terminal)\n")
		return nil
	}
	fmt.Fprintf(w, "holding both processes and their conns open for %v (Ctrl-C ends it): run ucxnet ls in another terminal\n", o.hold)
	select {
	case <-ctx.Done():
	case <-time.After(o.hold):
	}
	return nil
}

// demoChild is the running demo-server process.
type demoChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed when the process has exited
	err   error         // cmd.Wait's result, once done is closed
	once  sync.Once
}

// stop ends the child: EOF on its stdin asks it to exit; a kill follows if
// it has not after two seconds.
func (c *demoChild) stop() {
	c.once.Do(func() {
		c.stdin.Close()
		select {
		case <-c.done:
		case <-time.After(2 * time.Second):
			c.cmd.Process.Kill()
			<-c.done
		}
	})
}

// readyWriter forwards the child's stdout to w with a prefix and reports
// the "ready ADDR" line.
type readyWriter struct {
	w     io.Writer
	mu    sync.Mutex
	buf   []byte
	ready chan string
	sent  bool
}

func (r *readyWriter) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	for {
		i := bytes.IndexByte(r.buf, '\n')
		if i < 0 {
			break
		}
		line := string(r.buf[:i])
		r.buf = r.buf[i+1:]
		if addr, ok := strings.CutPrefix(line, "ready "); ok && !r.sent {
			r.sent = true
			r.ready <- addr
			continue
		}
		fmt.Fprintf(r.w, "[server] %s\n", line)
	}
	return len(p), nil
}

// startDemoServer re-executes this program as demo-server with the given
// registry and listener name, and waits for it to be ready.
func startDemoServer(ctx context.Context, sio *stdio, spec, name, netDevices string) (*demoChild, string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, "", fmt.Errorf("finding own executable: %w", err)
	}
	cmd := exec.Command(exe, demoServerCmd.Name, "--name", name, "--net-devices", netDevices)
	cmd.Env = append(os.Environ(), registry.EnvRegistry+"="+spec)
	rw := &readyWriter{w: sio.Err, ready: make(chan string, 1)}
	cmd.Stdout = rw
	cmd.Stderr = sio.Err
	cmd.WaitDelay = time.Second
	setChildAttrs(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("starting server process: %w", err)
	}
	child := &demoChild{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() {
		child.err = cmd.Wait()
		close(child.done)
	}()
	select {
	case addr := <-rw.ready:
		return child, addr, nil
	case <-child.done:
		return nil, "", fmt.Errorf("server process exited before it was ready: %v", child.err)
	case <-time.After(15 * time.Second):
		child.stop()
		return nil, "", errors.New("server process not ready after 15s")
	case <-ctx.Done():
		child.stop()
		return nil, "", ctx.Err()
	}
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

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}

// ratio formats a/b as "1.52x"; larger is better for ucxnet.
func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func fmtTransports(tl []string) string {
	if len(tl) == 0 {
		return "(unknown)"
	}
	return "[" + strings.Join(tl, " ") + "]"
}

// privateRegistry makes a directory registry in a fresh temporary folder
// for a parent and the child it starts, so that demo and bench work on a
// fresh machine and cannot meet other listeners. The caller removes dir.
func privateRegistry(prefix string) (dir, spec string, reg registry.Registry, err error) {
	dir, err = os.MkdirTemp("", prefix)
	if err != nil {
		return "", "", nil, err
	}
	spec = "dir:" + dir
	if reg, err = registry.Open(spec); err != nil {
		os.RemoveAll(dir)
		return "", "", nil, err
	}
	return dir, spec, reg, nil
}

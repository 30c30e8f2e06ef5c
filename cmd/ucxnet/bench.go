package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ucxnet/ucxnet/internal/progress"
	"github.com/ucxnet/ucxnet/registry"
	"github.com/ucxnet/ucxnet/ucxnet"
)

var benchCmd = &command{
	Name:  "bench",
	Short: "measure ucxnet against TCP and Unix sockets, and UCX's own ceiling",
	Long: `Bench measures, in one run and between two processes (this one and a
bench-server child with a private registry), for each transport of
--transports:

  ucx    ucxnet over UCX, with the current UCX_TLS (the child inherits it)
  tcp    Go TCP over 127.0.0.1
  unix   a Unix domain socket

  - 64 B ping-pong round trip, p50 and p99, one conn;
  - streaming throughput, one conn and 16 conns, for each write size of
    --sizes (the server acknowledges the byte count at the end, so the
    time covers delivery);
  - HTTP/1.1 keep-alive requests/s with 1 and 32 concurrent clients;
  - CPU seconds (user+sys of both processes) per GB streamed.

The ratio columns compare ucx with each other transport, oriented so that
>1x means ucx is better (faster, more throughput, less CPU). When
ucx_perftest is on PATH, bench also runs UCX's own ucp_am_lat and
ucp_am_bw with the same environment and reports ucxnet's fraction of it.`,
	Setup: func(fs *flag.FlagSet) func(context.Context, *stdio, []string) error {
		var o benchOptions
		transports := fs.String("transports", "ucx,tcp,unix", "comma-separated `list` of transports: ucx, tcp, unix")
		sizes := fs.String("sizes", "4k,64k,1m", "comma-separated streaming write `sizes` (k = KiB, m = MiB)")
		fs.DurationVar(&o.duration, "duration", time.Second, "`time` per measurement")
		fs.BoolVar(&o.json, "json", false, "print the results as JSON")
		fs.BoolVar(&o.perftest, "perftest", true, "also run ucx_perftest, when on PATH, for UCX's ceiling")
		fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of this (the client) process's measurements to `file`")
		return func(ctx context.Context, sio *stdio, args []string) error {
			if len(args) != 0 {
				return usagef("bench takes no arguments")
			}
			var err error
			if o.transports, err = parseTransports(*transports); err != nil {
				return usagef("%v", err)
			}
			if o.sizes, err = parseSizes(*sizes); err != nil {
				return usagef("%v", err)
			}
			if o.duration <= 0 {
				return usagef("--duration must be positive")
			}
			return runBench(ctx, sio, o)
		}
	},
}

type benchOptions struct {
	transports []string
	sizes      []int
	duration   time.Duration
	json       bool
	perftest   bool
	cpuProfile string
}

// Bench parameters.
const (
	benchPingSize    = 64
	benchStreamConns = 16
	benchHTTPHigh    = 32
)

func parseTransports(s string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(strings.ToLower(f))
		switch f {
		case "ucx", "tcp", "unix":
		case "":
			continue
		default:
			return nil, fmt.Errorf("unknown transport %q (want ucx, tcp or unix)", f)
		}
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no transports")
	}
	return out, nil
}

// parseSizes parses "4k,64k,1m" (k = KiB, m = MiB; a bare number is bytes).
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(strings.ToLower(f))
		if f == "" {
			continue
		}
		orig, mult := f, 1
		for _, suf := range []struct {
			s string
			m int
		}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"kb", 1 << 10}, {"mb", 1 << 20}, {"k", 1 << 10}, {"m", 1 << 20}, {"b", 1}} {
			if t, ok := strings.CutSuffix(f, suf.s); ok {
				f, mult = t, suf.m
				break
			}
		}
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || n > 64<<20/mult {
			return nil, fmt.Errorf("bad size %q (want e.g. 4k, 64k, 1m; at most 64m)", orig)
		}
		out = append(out, n*mult)
	}
	if len(out) == 0 {
		return nil, errors.New("no sizes")
	}
	return out, nil
}

// fmtSize formats a byte count as "4KiB", "1MiB" or "100B".
func fmtSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// benchReport is the result of a run (the --json output).
type benchReport struct {
	UCXVersion string          `json:"ucx_version"`
	UCXTLS     string          `json:"ucx_tls"` // "" when unset
	Duration   string          `json:"duration"`
	Transports []string        `json:"transports"`
	Sizes      []int           `json:"sizes"`
	UCXVia     []string        `json:"ucx_via,omitempty"` // UCX transports carrying the ucx conns
	Rows       []*benchRow     `json:"rows"`
	CPU        map[string]*cpu `json:"cpu"` // streaming phase, per transport
	Perftest   *perftestReport `json:"perftest,omitempty"`
}

// benchRow is one measured quantity, with a value per transport.
type benchRow struct {
	Key    string             `json:"key"`
	Label  string             `json:"label"`
	Unit   string             `json:"unit"`
	Better string             `json:"better"` // "lower" or "higher"
	Values map[string]float64 `json:"values"`
}

// cpu is the CPU time of both processes over a streaming phase.
type cpu struct {
	ClientSec float64 `json:"client_s"`
	ServerSec float64 `json:"server_s"`
	Bytes     int64   `json:"bytes"`
}

func (r *benchReport) row(key, label, unit, better string) *benchRow {
	for _, x := range r.Rows {
		if x.Key == key {
			return x
		}
	}
	x := &benchRow{Key: key, Label: label, Unit: unit, Better: better, Values: map[string]float64{}}
	r.Rows = append(r.Rows, x)
	return x
}

// benchRows creates the rows in table order, so that they print in it.
func (r *benchReport) benchRows(sizes []int) {
	r.row("rtt_p50_us", "64 B round trip p50", "µs", "lower")
	r.row("rtt_p99_us", "64 B round trip p99", "µs", "lower")
	for _, s := range sizes {
		r.row(streamKey(s, 1), fmt.Sprintf("stream %s writes, 1 conn", fmtSize(s)), "MB/s", "higher")
		r.row(streamKey(s, benchStreamConns), fmt.Sprintf("stream %s writes, %d conns", fmtSize(s), benchStreamConns), "MB/s", "higher")
	}
	r.row(httpKey(1), "HTTP/1.1 req/s, 1 client", "req/s", "higher")
	r.row(httpKey(benchHTTPHigh), fmt.Sprintf("HTTP/1.1 req/s, %d clients", benchHTTPHigh), "req/s", "higher")
	r.row("cpu_s_per_gb", "CPU s per GB streamed", "s/GB", "lower")
}

func streamKey(size, conns int) string {
	return fmt.Sprintf("stream_%s_%dconn_mbps", fmtSize(size), conns)
}

func httpKey(clients int) string { return fmt.Sprintf("http_%dclient_rps", clients) }

// progressLine rewrites one status line on stderr.
type progressLine struct {
	w    io.Writer
	last int
}

func (p *progressLine) set(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	pad := ""
	if n := p.last - len(s); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	fmt.Fprintf(p.w, "\rbench: %s%s", s, pad)
	p.last = len(s)
}

func (p *progressLine) clear() {
	if p.last > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.last+len("bench: ")))
		p.last = 0
	}
}

func runBench(ctx context.Context, sio *stdio, o benchOptions) error {
	err := runBench1(ctx, sio, o)
	if err != nil && ctx.Err() != nil {
		return errors.New("interrupted")
	}
	return err
}

func runBench1(ctx context.Context, sio *stdio, o benchOptions) error {
	t0 := time.Now()
	rep := &benchReport{
		UCXVersion: progress.Version(),
		UCXTLS:     os.Getenv("UCX_TLS"),
		Duration:   o.duration.String(),
		Transports: o.transports,
		Sizes:      o.sizes,
		CPU:        map[string]*cpu{},
	}
	rep.benchRows(o.sizes)
	prog := &progressLine{w: sio.Err}
	defer prog.clear()

	dir, spec, reg, err := privateRegistry("ucxnet-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	prog.set("starting the server process")
	child, err := startBenchServer(ctx, sio, spec, dir, o.transports)
	if err != nil {
		return err
	}
	defer child.stop()
	// A signal ends the run: killing the child unblocks whatever waits on
	// it.
	stopWatch := context.AfterFunc(ctx, child.kill)
	defer stopWatch()

	var ut *ucxnet.Transport
	for _, tr := range o.transports {
		if tr == "ucx" {
			if ut, err = ucxnet.NewTransport(ucxnet.Config{Registry: reg}); err != nil {
				return err
			}
			defer ut.Close()
		}
	}

	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	for _, tr := range o.transports {
		b := &benchTransport{
			name: tr, addrs: child.addrs[tr], ut: ut, dur: o.duration,
			prog: func(what string) { prog.set("%s: %s", tr, what) },
		}
		if err := b.run(ctx, rep, child, o.sizes); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%s: %w", tr, err)
		}
		if tr == "ucx" {
			rep.UCXVia = b.via
		}
	}

	if o.perftest {
		if path, err := exec.LookPath("ucx_perftest"); err == nil {
			rep.Perftest = runPerftest(ctx, path, o, rep, func(what string) { prog.set("ucx_perftest: %s", what) })
			if ctx.Err() != nil {
				return ctx.Err()
			}
		} else {
			rep.Perftest = &perftestReport{Error: "ucx_perftest is not on PATH"}
		}
	}
	prog.clear()

	if o.json {
		enc := json.NewEncoder(sio.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printBench(sio.Out, rep, time.Since(t0))
	return nil
}

// benchTransport runs the measurements of one transport.
type benchTransport struct {
	name  string
	addrs map[string]string // service → address
	ut    *ucxnet.Transport
	dur   time.Duration
	prog  func(string)
	via   []string // ucx: UCX transports of the conns
}

func (b *benchTransport) dial(ctx context.Context, svc string) (net.Conn, error) {
	addr, ok := b.addrs[svc]
	if !ok {
		return nil, fmt.Errorf("server has no %s listener", svc)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	switch b.name {
	case "ucx":
		d := ucxnet.Dialer{Transport: b.ut}
		c, err := d.DialContext(ctx, "ucx", addr)
		if err == nil && b.via == nil {
			b.via = c.(*ucxnet.Conn).Transports()
		}
		return c, err
	case "tcp":
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	default:
		var d net.Dialer
		return d.DialContext(ctx, "unix", addr)
	}
}

func (b *benchTransport) run(ctx context.Context, rep *benchReport, child *benchChild, sizes []int) error {
	// Round trips.
	b.prog("64 B round trips")
	p50, p99, err := b.pingPong(ctx)
	if err != nil {
		return fmt.Errorf("round trips: %w", err)
	}
	rep.row("rtt_p50_us", "", "", "").Values[b.name] = us(p50)
	rep.row("rtt_p99_us", "", "", "").Values[b.name] = us(p99)

	// Streaming, with the CPU time of both processes around it.
	cu0, cs0, err := child.rusage()
	if err != nil {
		return err
	}
	pu0, ps0 := selfRusage()
	var total int64
	for _, size := range sizes {
		for _, conns := range []int{1, benchStreamConns} {
			b.prog(fmt.Sprintf("streaming %s writes over %d conn(s)", fmtSize(size), conns))
			n, el, err := b.stream(ctx, size, conns)
			if err != nil {
				return fmt.Errorf("streaming %s writes over %d conns: %w", fmtSize(size), conns, err)
			}
			total += n
			rep.row(streamKey(size, conns), "", "", "").Values[b.name] = float64(n) / el.Seconds() / 1e6
		}
	}
	pu1, ps1 := selfRusage()
	cu1, cs1, err := child.rusage()
	if err != nil {
		return err
	}
	c := &cpu{
		ClientSec: (pu1 - pu0 + ps1 - ps0).Seconds(),
		ServerSec: (cu1 - cu0 + cs1 - cs0).Seconds(),
		Bytes:     total,
	}
	rep.CPU[b.name] = c
	if total > 0 {
		rep.row("cpu_s_per_gb", "", "", "").Values[b.name] = (c.ClientSec + c.ServerSec) / (float64(total) / 1e9)
	}

	// HTTP.
	for _, clients := range []int{1, benchHTTPHigh} {
		b.prog(fmt.Sprintf("HTTP with %d client(s)", clients))
		rps, err := b.http(ctx, clients)
		if err != nil {
			return fmt.Errorf("HTTP with %d clients: %w", clients, err)
		}
		rep.row(httpKey(clients), "", "", "").Values[b.name] = rps
	}
	return nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

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

// closeWriter is a conn that can shut down its writing side.
type closeWriter interface {
	CloseWrite() error
}

// stream writes size-byte writes over conns sink conns for b.dur, shuts
// down writing and waits for every conn's acknowledged byte count. It
// returns the bytes delivered and the time from the first write to the
// last acknowledgement.
func (b *benchTransport) stream(ctx context.Context, size, conns int) (int64, time.Duration, error) {
	cs := make([]net.Conn, 0, conns)
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for range conns {
		c, err := b.dial(ctx, svcSink)
		if err != nil {
			return 0, 0, err
		}
		c.SetDeadline(time.Now().Add(b.dur + 30*time.Second))
		cs = append(cs, c)
	}
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i)
	}
	var (
		stop  atomic.Bool
		total atomic.Int64
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	fail := func(err error) {
		errMu.Lock()
		if first == nil {
			first = err
		}
		errMu.Unlock()
		stop.Store(true)
	}
	start := time.Now()
	timer := time.AfterFunc(b.dur, func() { stop.Store(true) })
	defer timer.Stop()
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var n int64
			for !stop.Load() {
				m, err := c.Write(buf)
				n += int64(m)
				if err != nil {
					fail(err)
					return
				}
			}
			cw, ok := c.(closeWriter)
			if !ok {
				fail(fmt.Errorf("%T has no CloseWrite", c))
				return
			}
			if err := cw.CloseWrite(); err != nil {
				fail(err)
				return
			}
			var ack [8]byte
			if _, err := io.ReadFull(c, ack[:]); err != nil {
				fail(fmt.Errorf("reading the acknowledgement: %w", err))
				return
			}
			if got := binary.BigEndian.Uint64(ack[:]); got != uint64(n) {
				fail(fmt.Errorf("server acknowledged %d bytes, %d were written", got, n))
				return
			}
			total.Add(n)
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if first != nil {
		return 0, 0, first
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
		stop  atomic.Bool
		count atomic.Int64
		errMu sync.Mutex
		first error
	)
	fail := func(err error) {
		errMu.Lock()
		first = cmpOr(first, err)
		errMu.Unlock()
		stop.Store(true)
	}
	worker := func(warmup int, wg *sync.WaitGroup) {
		defer wg.Done()
		buf := make([]byte, 4<<10)
		for i := 0; i < warmup; i++ {
			if err := get(buf); err != nil {
				fail(err)
				return
			}
		}
		if warmup > 0 {
			return
		}
		for !stop.Load() {
			if err := get(buf); err != nil {
				fail(err)
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
	if first != nil {
		return 0, first
	}
	start := time.Now()
	timer := time.AfterFunc(b.dur, func() { stop.Store(true) })
	defer timer.Stop()
	for range clients {
		wg.Add(1)
		go worker(0, &wg)
	}
	wg.Wait()
	el := time.Since(start)
	if first != nil {
		return 0, first
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return float64(count.Load()) / el.Seconds(), nil
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// benchChild is the running bench-server process.
type benchChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // its stdout, line by line
	addrs map[string]map[string]string
	done  chan struct{}
	err   error
	once  sync.Once
	mu    sync.Mutex // one command at a time
}

// kill kills the child at once.
func (c *benchChild) kill() { c.cmd.Process.Kill() }

// stop ends the child: EOF on its stdin asks it to exit, a kill follows
// after a second.
func (c *benchChild) stop() {
	c.once.Do(func() {
		c.stdin.Close()
		select {
		case <-c.done:
		case <-time.After(time.Second):
			c.cmd.Process.Kill()
			<-c.done
		}
	})
}

// rusage asks the child for its CPU time so far.
func (c *benchChild) rusage() (user, sys time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := io.WriteString(c.stdin, "rusage\n"); err != nil {
		return 0, 0, fmt.Errorf("asking the server for its rusage: %w", err)
	}
	select {
	case line, ok := <-c.lines:
		if !ok {
			return 0, 0, fmt.Errorf("server process exited: %v", c.err)
		}
		var u, s int64
		if _, err := fmt.Sscanf(line, "rusage %d %d", &u, &s); err != nil {
			return 0, 0, fmt.Errorf("server's rusage answer %q: %v", line, err)
		}
		return time.Duration(u) * time.Microsecond, time.Duration(s) * time.Microsecond, nil
	case <-time.After(10 * time.Second):
		return 0, 0, errors.New("server did not answer the rusage request in 10s")
	}
}

// startBenchServer re-executes this program as bench-server and waits for
// its "ready" line.
func startBenchServer(ctx context.Context, sio *stdio, spec, dir string, transports []string) (*benchChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding own executable: %w", err)
	}
	cmd := exec.Command(exe, benchServerCmd.Name, "--transports", strings.Join(transports, ","), "--dir", dir)
	cmd.Env = append(os.Environ(), registry.EnvRegistry+"="+spec)
	cmd.Stderr = sio.Err
	cmd.WaitDelay = time.Second
	setChildAttrs(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the server process: %w", err)
	}
	c := &benchChild{cmd: cmd, stdin: stdin, lines: make(chan string, 16), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	go func() {
		err := cmd.Wait()
		c.err = err
		close(c.done)
	}()
	fail := func(err error) (*benchChild, error) {
		c.kill()
		<-c.done
		return nil, err
	}
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	select {
	case line, ok := <-c.lines:
		if !ok {
			<-c.done
			return nil, fmt.Errorf("server process exited before it was ready: %v", c.err)
		}
		js, ok := strings.CutPrefix(line, "ready ")
		if !ok {
			return fail(fmt.Errorf("server process said %q, want ready", line))
		}
		if err := json.Unmarshal([]byte(js), &c.addrs); err != nil {
			return fail(fmt.Errorf("server's ready line %q: %v", line, err))
		}
		return c, nil
	case <-timeout.C:
		return fail(errors.New("server process not ready after 20s"))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
}

// printBench prints the report as a table.
func printBench(w io.Writer, r *benchReport, el time.Duration) {
	tls := r.UCXTLS
	if tls == "" {
		tls = "(unset: UCX picks)"
	}
	fmt.Fprintf(w, "ucxnet bench: UCX %s, UCX_TLS=%s, %v per measurement, client and server in separate processes\n", r.UCXVersion, tls, r.Duration)
	if len(r.UCXVia) > 0 {
		fmt.Fprintf(w, "ucx conns carried by UCX transports %s\n", fmtTransports(r.UCXVia))
	}
	fmt.Fprintln(w)

	var others []string
	hasUCX := false
	for _, t := range r.Transports {
		if t == "ucx" {
			hasUCX = true
		} else {
			others = append(others, t)
		}
	}
	header := []string{""}
	header = append(header, r.Transports...)
	if hasUCX {
		for _, o := range others {
			header = append(header, "ucx vs "+o)
		}
	}
	table := [][]string{header}
	for _, row := range r.Rows {
		line := []string{row.Label}
		for _, t := range r.Transports {
			line = append(line, fmtValue(row.Values[t], row.Unit))
		}
		if hasUCX {
			for _, o := range others {
				u, v := row.Values["ucx"], row.Values[o]
				if row.Better == "lower" {
					u, v = v, u
				}
				line = append(line, ratio(u, v))
			}
		}
		table = append(table, line)
	}
	widths := make([]int, len(header))
	for _, l := range table {
		for i, c := range l {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	for _, l := range table {
		var sb strings.Builder
		for i, c := range l {
			pad := strings.Repeat(" ", widths[i]-len([]rune(c)))
			if i == 0 {
				sb.WriteString(c + pad)
			} else {
				sb.WriteString("   " + pad + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(sb.String(), " "))
	}
	if hasUCX && len(others) > 0 {
		fmt.Fprintf(w, "(ucx vs X: >1x means ucx is better: for latency and CPU it is X/ucx, i.e. \"x faster\" / \"x less CPU\"; for rates ucx/X)\n")
	}
	fmt.Fprintf(w, "(MB/s = 10^6 bytes/s; streams are acknowledged by the server, so they time delivery; CPU is user+sys of both processes)\n")
	for _, t := range r.Transports {
		if c := r.CPU[t]; c != nil {
			fmt.Fprintf(w, "  %-5s streamed %.2f GB: client %.2f s CPU, server %.2f s CPU\n", t, float64(c.Bytes)/1e9, c.ClientSec, c.ServerSec)
		}
	}
	if r.Perftest != nil {
		fmt.Fprintln(w)
		printPerftest(w, r)
	}
	fmt.Fprintf(w, "\nbench finished in %v\n", el.Round(100*time.Millisecond))
}

func fmtValue(v float64, unit string) string {
	if v == 0 {
		return "-"
	}
	switch unit {
	case "µs":
		return fmt.Sprintf("%.1f µs", v)
	case "MB/s":
		return fmt.Sprintf("%.0f MB/s", v)
	case "req/s":
		return fmt.Sprintf("%.0f req/s", v)
	case "s/GB":
		return fmt.Sprintf("%.2f s/GB", v)
	}
	return fmt.Sprintf("%.3g %s", v, unit)
}

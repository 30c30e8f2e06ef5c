package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/ucxnet/ucxnet/ucxnet"
)

func runBench(ctx context.Context, sio *stdio, o benchOptions) error {
	err := runBench1(ctx, sio, o)
	if err != nil && ctx.Err() != nil {
		return errors.New("interrupted")
	}
	return err
}

func runBench1(ctx context.Context, sio *stdio, o benchOptions) error {
	t0 := time.Now()
	r := &benchRun{o: o, prog: newProgressLine(sio.Err), sio: sio}
	defer r.close()
	r.onClose(r.prog.clear)
	r.rep = &benchReport{
		UCXVersion: ucxnet.UCX().Version,
		UCXTLS:     os.Getenv("UCX_TLS"),
		Duration:   o.duration.String(),
		Transports: o.transports,
		Sizes:      o.sizes,
		CPU:        map[string]*cpu{},
	}
	r.rep.benchRows(o.sizes, o.workloads)
	setUp := r.startServer
	if o.remote != "" {
		setUp = r.dialServer
	}
	if err := setUp(ctx, sio); err != nil {
		return err
	}
	if err := r.startProfile(); err != nil {
		return err
	}
	if err := r.measure(ctx); err != nil {
		return err
	}
	if err := r.perftest(ctx); err != nil {
		return err
	}
	r.prog.clear()

	if o.json {
		enc := json.NewEncoder(sio.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(r.rep)
	}
	printBench(sio.Out, r.rep, time.Since(t0))
	return nil
}

// benchRun is one run of bench: the server it measures against, the
// client's ucxnet transport, the report it fills in and what to undo at
// its end.
type benchRun struct {
	o     benchOptions
	rep   *benchReport
	prog  *progressLine
	ut    *ucxnet.Transport // nil when the server is local and ucx is not measured
	peer  benchPeer
	addrs map[string]map[string]string // transport → service → address
	sio   *stdio
	// The private registry of a local run (spec "" with --remote) and
	// the directory of its unix sockets.
	spec, dir string
	undo      []func()
}

// onClose adds f to what close does; close runs the latest first.
func (r *benchRun) onClose(f func()) { r.undo = append(r.undo, f) }

// close undoes the run's set-up, the last step first.
func (r *benchRun) close() {
	for i := len(r.undo) - 1; i >= 0; i-- {
		r.undo[i]()
	}
}

// dialServer connects to the bench server named by --remote (bench
// --serve on another host), which runs no ucx_perftest.
func (r *benchRun) dialServer(ctx context.Context, _ *stdio) error {
	r.rep.Server = r.o.remote
	r.o.perftest = false
	r.prog.set("dialing the bench server %s", r.o.remote)
	ut, err := ucxnet.NewTransport(ucxnet.Config{})
	if err != nil {
		return err
	}
	r.ut = ut
	r.onClose(func() { ut.Close() })
	rem, err := dialBenchRemote(ctx, ut, r.o.remote, r.o.transports)
	if err != nil {
		return err
	}
	r.onClose(rem.close)
	r.peer, r.addrs = rem, rem.addrs
	return nil
}

// startServer starts the bench server as a child process, with a private
// registry that the two processes share.
func (r *benchRun) startServer(ctx context.Context, sio *stdio) error {
	dir, spec, reg, err := privateRegistry("ucxnet-bench-")
	if err != nil {
		return err
	}
	r.onClose(func() { os.RemoveAll(dir) })
	r.spec, r.dir = spec, dir
	r.prog.set("starting the server process")
	child, err := startBenchServer(ctx, sio, spec, dir, r.o.transports)
	if err != nil {
		return err
	}
	r.watch(ctx, child) // a signal ends the run
	r.peer, r.addrs = child, child.addrs
	if slices.Contains(r.o.transports, "ucx") {
		ut, err := ucxnet.NewTransport(ucxnet.Config{Registry: reg})
		if err != nil {
			return err
		}
		r.ut = ut
		r.onClose(func() { ut.Close() })
	}
	return nil
}

// startProfile starts the CPU profile that --cpuprofile asks for.
func (r *benchRun) startProfile() error {
	if r.o.cpuProfile == "" {
		return nil
	}
	f, err := os.Create(r.o.cpuProfile)
	if err != nil {
		return err
	}
	r.onClose(func() { f.Close() })
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	r.onClose(pprof.StopCPUProfile)
	return nil
}

// measure runs the workloads over each transport, one transport after
// another, then the idle workload over all of them.
func (r *benchRun) measure(ctx context.Context) error {
	var bs []*benchTransport
	for _, tr := range r.o.transports {
		b := &benchTransport{
			name: tr, addrs: r.addrs[tr], ut: r.ut, dur: r.o.duration,
			prog: func(what string) { r.prog.set("%s: %s", tr, what) },
		}
		bs = append(bs, b)
		if err := b.run(ctx, r.rep, r.peer, r.o.sizes, r.o.workloads); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%s: %w", tr, err)
		}
	}
	if r.o.workloads["idle"] {
		if err := r.runIdle(ctx, bs, r.o.duration); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("requests after idle: %w", err)
		}
	}
	for _, b := range bs {
		if b.name == "ucx" {
			r.rep.UCXVia, r.rep.UCXLane = b.via, b.lane
		}
	}
	return nil
}

// perftest adds ucx_perftest's numbers when asked for and it is on PATH.
func (r *benchRun) perftest(ctx context.Context) error {
	if !r.o.perftest {
		return nil
	}
	path, err := exec.LookPath("ucx_perftest")
	if err != nil {
		r.rep.Perftest = &perftestReport{Error: "ucx_perftest is not on PATH"}
		return nil
	}
	r.rep.Perftest = runPerftest(ctx, path, r.o, r.rep, func(what string) { r.prog.set("ucx_perftest: %s", what) })
	return ctx.Err()
}

// benchTransport runs the measurements of one transport.
type benchTransport struct {
	name  string
	addrs map[string]string // service → address
	ut    *ucxnet.Transport
	dur   time.Duration
	prog  func(string)
	via   []string // ucx: UCX transports of the conns
	lane  string   // ucx: the conns' lane and why
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
			uc := c.(*ucxnet.Conn)
			lane, why := uc.Lane()
			b.via, b.lane = uc.Transports(), lane+": "+why
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

func (b *benchTransport) run(ctx context.Context, rep *benchReport, child benchPeer, sizes []int, workloads map[string]bool) error {
	if workloads["rtt"] {
		if err := b.roundTrips(ctx, rep); err != nil {
			return err
		}
	}
	if workloads["stream"] {
		if err := b.streams(ctx, rep, child, sizes); err != nil {
			return err
		}
	}
	if workloads["http"] {
		for _, clients := range []int{1, benchHTTPHigh} {
			b.prog(fmt.Sprintf("HTTP with %d client(s)", clients))
			rps, err := b.http(ctx, clients)
			if err != nil {
				return fmt.Errorf("HTTP with %d clients: %w", clients, err)
			}
			rep.row(httpKey(clients), "", "", "").Values[b.name] = rps
		}
	}
	return nil
}

// roundTrips measures the round-trip rows.
func (b *benchTransport) roundTrips(ctx context.Context, rep *benchReport) error {
	b.prog("64 B round trips")
	p50, p99, err := b.pingPong(ctx)
	if err != nil {
		return fmt.Errorf("round trips: %w", err)
	}
	rep.row("rtt_p50_us", "", "", "").Values[b.name] = us(p50)
	rep.row("rtt_p99_us", "", "", "").Values[b.name] = us(p99)
	b.prog(fmt.Sprintf("64 B ping-pongs over %d conns", benchPingConns))
	rtps, err := b.pingPongConns(ctx, benchPingConns)
	if err != nil {
		return fmt.Errorf("ping-pongs over %d conns: %w", benchPingConns, err)
	}
	rep.row(pingConnsKey(benchPingConns), "", "", "").Values[b.name] = rtps
	return nil
}

// streams measures the streaming rows, with the CPU time of both processes
// around them.
func (b *benchTransport) streams(ctx context.Context, rep *benchReport, child benchPeer, sizes []int) error {
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
	return nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

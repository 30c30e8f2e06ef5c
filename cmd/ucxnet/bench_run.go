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
	rep := &benchReport{
		UCXVersion: ucxnet.UCX().Version,
		UCXTLS:     os.Getenv("UCX_TLS"),
		Duration:   o.duration.String(),
		Transports: o.transports,
		Sizes:      o.sizes,
		CPU:        map[string]*cpu{},
	}
	rep.benchRows(o.sizes, o.workloads)
	prog := newProgressLine(sio.Err)
	defer prog.clear()

	var (
		ut    *ucxnet.Transport
		peer  benchPeer
		addrs map[string]map[string]string
	)
	if o.remote != "" {
		rep.Server = o.remote
		o.perftest = false
		prog.set("dialing the bench server %s", o.remote)
		var err error
		if ut, err = ucxnet.NewTransport(ucxnet.Config{}); err != nil {
			return err
		}
		defer ut.Close()
		r, err := dialBenchRemote(ctx, ut, o.remote, o.transports)
		if err != nil {
			return err
		}
		defer r.close()
		peer, addrs = r, r.addrs
	} else {
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
		// A signal ends the run: killing the child unblocks whatever waits
		// on it.
		stopWatch := context.AfterFunc(ctx, child.kill)
		defer stopWatch()
		peer, addrs = child, child.addrs

		if slices.Contains(o.transports, "ucx") {
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
	var bs []*benchTransport
	for _, tr := range o.transports {
		b := &benchTransport{
			name: tr, addrs: addrs[tr], ut: ut, dur: o.duration,
			prog: func(what string) { prog.set("%s: %s", tr, what) },
		}
		bs = append(bs, b)
		if err := b.run(ctx, rep, peer, o.sizes, o.workloads); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%s: %w", tr, err)
		}
	}
	if o.workloads["idle"] {
		if err := runIdle(ctx, rep, bs, o.duration, func(what string) { prog.set("%s", what) }); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("requests after idle: %w", err)
		}
	}
	for _, b := range bs {
		if b.name == "ucx" {
			rep.UCXVia, rep.UCXLane = b.via, b.lane
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

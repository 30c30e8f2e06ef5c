package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ucxnet/ucxnet/ucxnet"
)

// The "request after idle" rows: one conn per transport sends a 64 B
// request and waits for the echo, after sleeping gap before each request,
// so that both processes' progress engines (and the vCPUs) have gone
// idle, as with requests spaced in time. Transports take turns in rounds
// of benchIdleRound requests, so that they share the machine's state.
//
// Each transport's requests run between processes of their own: a client
// child (bench-idle) and, unless the server is remote, a server child
// that serves that transport only. A process that runs a ucxnet engine
// runs Go TCP faster than one that does not: the engine goroutine's
// poll(2) keeps its P in a system call, so the runtime never counts the
// process idle, and a request's first system call need not wake sysmon
// (Go TCP's request after 1 ms idle took ~70 µs beside ucxnet's engine
// and ~110 µs without it, on 2 vCPUs).
// Users compare ucxnet with Go TCP in a program that has no ucxnet.

// benchIdleGaps are the idle times measured.
var benchIdleGaps = []time.Duration{100 * time.Microsecond, time.Millisecond, 10 * time.Millisecond}

// benchIdleRound is the number of requests a transport sends per turn.
const benchIdleRound = 10

// benchIdleMin is the fewest requests per transport and gap.
const benchIdleMin = 50

func idleKey(gap time.Duration, p int) string {
	return fmt.Sprintf("idle_%s_p%d_us", fmtGap(gap), p)
}

// fmtGap formats a gap as "100us", "1ms" or "10ms".
func fmtGap(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%dus", d/time.Microsecond)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// idleRows creates the request-after-idle rows.
func (r *benchReport) idleRows() {
	for _, gap := range benchIdleGaps {
		for _, p := range []int{50, 99} {
			r.row(idleKey(gap, p), fmt.Sprintf("64 B request after %v idle p%d", gap, p), "µs", "lower")
		}
	}
}

// benchIdleCmd is a client process of the requests after idle.
var benchIdleCmd = &command{
	Name:   "bench-idle",
	Hidden: true,
	Short:  "(internal) a client process of bench's requests after idle",
	Long: `Bench-idle is started by "ucxnet bench", once per transport, so that
each transport's requests after idle are timed in processes of their own.
It dials ADDR (the echo service of a bench server) over --transport, sends
100 requests to warm up and prints "ready JSON" (for ucx, the UCX
transports of the conn and its lane), then answers commands on stdin, one
a line:

  run GAP N   sends N 64 B requests, each after GAP idle (a Go duration),
              and answers "lat NS..." with their round trips in ns

It exits at EOF on stdin.`,
	Args: "ADDR",
	Setup: func(fs *flag.FlagSet) func(context.Context, *stdio, []string) error {
		transport := fs.String("transport", "", "the `transport` to dial: ucx, tcp or unix")
		return func(ctx context.Context, sio *stdio, args []string) error {
			if len(args) != 1 {
				return usagef("bench-idle takes one address")
			}
			if _, err := parseTransports(*transport); err != nil || strings.Contains(*transport, ",") {
				return usagef("--transport: want one of ucx, tcp, unix")
			}
			return runIdleClient(ctx, sio, *transport, args[0])
		}
	},
}

// idleReady is the JSON of bench-idle's ready line.
type idleReady struct {
	Via  []string `json:"via,omitempty"`
	Lane string   `json:"lane,omitempty"`
}

// runIdleClient is bench-idle: it times requests after idle on one conn,
// as its parent asks.
func runIdleClient(ctx context.Context, sio *stdio, transport, addr string) error {
	b := &benchTransport{name: transport, addrs: map[string]string{svcEcho: addr}}
	if transport == "ucx" {
		ut, err := ucxnet.DefaultTransport()
		if err != nil {
			return err
		}
		b.ut = ut
	}
	c, err := b.dial(ctx, svcEcho)
	if err != nil {
		return err
	}
	defer c.Close()
	req := make([]byte, benchPingSize)
	buf := make([]byte, benchPingSize)
	one := func() (time.Duration, error) {
		s := time.Now()
		if _, err := c.Write(req); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			return 0, err
		}
		return time.Since(s), nil
	}
	c.SetDeadline(time.Now().Add(time.Minute))
	for range 100 { // warm-up
		if _, err := one(); err != nil {
			return err
		}
	}
	ready, err := json.Marshal(idleReady{Via: b.via, Lane: b.lane})
	if err != nil {
		return err
	}
	out := bufio.NewWriter(sio.Out)
	fmt.Fprintf(out, "ready %s\n", ready)
	if err := out.Flush(); err != nil {
		return err
	}
	sc := bufio.NewScanner(sio.In)
	for sc.Scan() {
		gap, n, err := parseIdleRun(sc.Text())
		if err != nil {
			fmt.Fprintf(out, "error %v\n", err)
			if err := out.Flush(); err != nil {
				return err
			}
			continue
		}
		c.SetDeadline(time.Now().Add(time.Minute))
		out.WriteString("lat")
		for range n {
			time.Sleep(gap)
			l, err := one()
			if err != nil {
				return err
			}
			fmt.Fprintf(out, " %d", l.Nanoseconds())
		}
		out.WriteString("\n")
		if err := out.Flush(); err != nil {
			return err
		}
	}
	return sc.Err()
}

// parseIdleRun parses bench-idle's "run GAP N".
func parseIdleRun(line string) (gap time.Duration, n int, err error) {
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "run" {
		return 0, 0, fmt.Errorf("unknown command %q", truncate(line, 80))
	}
	gap, err = time.ParseDuration(f[1])
	if err != nil || gap < 0 || gap > time.Minute {
		return 0, 0, fmt.Errorf("run: bad gap %q", truncate(f[1], 40))
	}
	n, err = strconv.Atoi(f[2])
	if err != nil || n < 1 || n > 10000 {
		return 0, 0, fmt.Errorf("run: bad count %q", truncate(f[2], 40))
	}
	return gap, n, nil
}

// parseLatencies parses the answer of bench-idle's run.
func parseLatencies(s string, n int) ([]time.Duration, error) {
	f := strings.Fields(s)
	if len(f) != n {
		return nil, fmt.Errorf("%d latencies, want %d", len(f), n)
	}
	lat := make([]time.Duration, n)
	for i, v := range f {
		ns, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ns < 0 {
			return nil, fmt.Errorf("bad latency %q", truncate(v, 40))
		}
		lat[i] = time.Duration(ns)
	}
	return lat, nil
}

// idleClient starts b's pair of processes: a server child that serves
// b's transport alone (the remote server when there is one) and a
// bench-idle child that dials its echo service.
func (r *benchRun) idleClient(ctx context.Context, b *benchTransport) (*benchChild, error) {
	addr, spec := b.addrs[svcEcho], ""
	if r.o.remote == "" {
		// A directory of its own: the run's server has its unix sockets
		// in r.dir.
		dir, err := os.MkdirTemp(r.dir, "idle-"+b.name+"-")
		if err != nil {
			return nil, err
		}
		srv, err := startBenchServer(ctx, r.sio, r.spec, dir, []string{b.name})
		if err != nil {
			return nil, err
		}
		r.watch(ctx, srv)
		addr, spec = srv.addrs[b.name][svcEcho], r.spec
	}
	if addr == "" {
		return nil, fmt.Errorf("server has no %s listener", svcEcho)
	}
	c, ready, err := startChild(ctx, r.sio, spec, benchIdleCmd.Name, "--transport", b.name, addr)
	if err != nil {
		return nil, err
	}
	r.watch(ctx, c)
	var rd idleReady
	if err := json.Unmarshal([]byte(ready), &rd); err != nil {
		return nil, fmt.Errorf("bench-idle's ready line %q: %v", truncate(ready, 80), err)
	}
	if b.via == nil {
		b.via = rd.Via
	}
	if b.lane == "" {
		b.lane = rd.Lane
	}
	return c, nil
}

// runIdle measures the request-after-idle rows over every transport of
// bs, taking turns, each transport between processes of its own. Each gap
// gets about d/2 of requests per transport (at least benchIdleMin).
func (r *benchRun) runIdle(ctx context.Context, bs []*benchTransport, d time.Duration) error {
	r.prog.set("starting the processes of the requests after idle")
	clients := make([]*benchChild, len(bs))
	for i, b := range bs {
		c, err := r.idleClient(ctx, b)
		if err != nil {
			return fmt.Errorf("%s: %w", b.name, err)
		}
		clients[i] = c
	}
	for _, gap := range benchIdleGaps {
		r.prog.set("64 B requests after %v idle", gap)
		n := max(benchIdleMin, int(d/2/gap))
		lat := make([][]time.Duration, len(bs))
		for round := 0; round*benchIdleRound < n; round++ {
			for k := range bs {
				i := (k + round) % len(bs) // who goes first rotates
				ans, err := clients[i].ask(fmt.Sprintf("run %v %d", gap, benchIdleRound), "lat", time.Minute)
				if err != nil {
					return fmt.Errorf("%s: %w", bs[i].name, err)
				}
				l, err := parseLatencies(ans, benchIdleRound)
				if err != nil {
					return fmt.Errorf("%s: bench-idle: %w", bs[i].name, err)
				}
				lat[i] = append(lat[i], l...)
				if err := ctx.Err(); err != nil {
					return err
				}
			}
		}
		for i, b := range bs {
			r.rep.row(idleKey(gap, 50), "", "", "").Values[b.name] = us(percentile(lat[i], 50))
			r.rep.row(idleKey(gap, 99), "", "", "").Values[b.name] = us(percentile(lat[i], 99))
		}
	}
	return nil
}

// watch ends child c with the run, and at once if ctx ends first: killing
// it unblocks whatever waits on it.
func (r *benchRun) watch(ctx context.Context, c *benchChild) {
	r.onClose(c.stop)
	stop := context.AfterFunc(ctx, c.kill)
	r.onClose(func() { stop() })
}

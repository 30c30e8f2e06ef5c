package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

var benchCmd = &command{
	Name:  "bench",
	Short: "measure ucxnet against TCP and Unix sockets, and UCX's own ceiling",
	Long: `Bench measures, in one run and between two processes (this one and a
bench-server child with a private registry, or a server started elsewhere
with --serve), for each transport of --transports:

  ucx    ucxnet over UCX, with the current UCX_TLS (the child inherits it)
  tcp    Go TCP over 127.0.0.1
  unix   a Unix domain socket

  - 64 B ping-pong round trip, p50 and p99, one conn;
  - 64 B ping-pong on 16 conns at once: round trips/s of all together;
  - 64 B request after 100µs, 1ms and 10ms idle, p50 and p99, one conn
    per transport, the transports taking turns (requests spaced in time:
    the engines and the CPUs go idle between them), each transport
    between a client and a server process of its own (with --remote, the
    remote server's): a process that runs a ucxnet engine runs Go TCP
    faster than a process without one;
  - streaming throughput, one conn and 16 conns, for each write size of
    --sizes (the server acknowledges the byte count at the end, so the
    time covers delivery);
  - HTTP/1.1 keep-alive requests/s with 1 and 32 concurrent clients;
  - CPU seconds (user+sys of both processes) per GB streamed.

The ratio columns compare ucx with each other transport, oriented so that
>1x means ucx is better (faster, more throughput, less CPU). When
ucx_perftest is on PATH, bench also runs UCX's own ucp_am_lat and
ucp_am_bw with the same environment and reports ucxnet's fraction of it.

Across hosts (or network namespaces), with a registry both reach
(UCXNET_REGISTRY: a shared directory or the registry server):

  host B:  ucxnet bench --serve NAME [--tcp-host ADDR]
  host A:  ucxnet bench --remote NAME

The server publishes NAME (its control conn) and NAME-echo, NAME-sink and
NAME-http, and runs Go TCP servers on --tcp-host (default: the host of the
TCP endpoint its listener publishes for the kernel-TCP lane), so ucx and
Go TCP cross the same link in one run; it serves until interrupted. The
ucx conns take the lane a dial picks (UCXNET_LANE=ucx on host A forces
UCX). With --remote the transports are ucx and tcp, and ucx_perftest is
not run.`,
	Setup: func(fs *flag.FlagSet) func(context.Context, *stdio, []string) error {
		var o benchOptions
		transports := fs.String("transports", "ucx,tcp,unix", "comma-separated `list` of transports: ucx, tcp, unix")
		sizes := fs.String("sizes", "4k,64k,1m", "comma-separated streaming write `sizes` (k = KiB, m = MiB)")
		fs.DurationVar(&o.duration, "duration", time.Second, "`time` per measurement")
		fs.BoolVar(&o.json, "json", false, "print the results as JSON")
		fs.BoolVar(&o.perftest, "perftest", true, "also run ucx_perftest, when on PATH, for UCX's ceiling")
		workloads := fs.String("workloads", "rtt,stream,http,idle", "comma-separated `list` of workloads: rtt (round trips, ping-pongs), stream (and CPU), http, idle (requests after idle)")
		fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of this (the client) process's measurements to `file`")
		fs.StringVar(&o.remote, "remote", "", "measure against the bench server published as `NAME` (see --serve)")
		serve := fs.String("serve", "", "run a bench server published as `NAME` until interrupted, for --remote elsewhere")
		tcpHost := fs.String("tcp-host", "", "with --serve: `host` the Go TCP servers listen on")
		return func(ctx context.Context, sio *stdio, args []string) error {
			if len(args) != 0 {
				return usagef("bench takes no arguments")
			}
			explicit := map[string]bool{}
			fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
			if (*serve != "" || o.remote != "") && !explicit["transports"] {
				*transports = "ucx,tcp"
			}
			var err error
			if o.transports, err = parseTransports(*transports); err != nil {
				return usagef("%v", err)
			}
			switch {
			case *serve != "" && o.remote != "":
				return usagef("--serve and --remote exclude each other")
			case *tcpHost != "" && *serve == "":
				return usagef("--tcp-host goes with --serve")
			case (*serve != "" || o.remote != "") && slices.Contains(o.transports, "unix"):
				return usagef("unix sockets do not cross hosts: --serve and --remote take ucx and tcp")
			case *serve != "":
				return runBenchServer(ctx, sio, o.transports, benchServe{name: *serve, tcpHost: *tcpHost})
			}
			if o.sizes, err = parseSizes(*sizes); err != nil {
				return usagef("%v", err)
			}
			if o.workloads, err = parseWorkloads(*workloads); err != nil {
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
	workloads  map[string]bool
	duration   time.Duration
	json       bool
	perftest   bool
	cpuProfile string
	remote     string // the name of a "bench --serve" server; "" runs a child
}

// Bench parameters.
const (
	benchPingSize    = 64
	benchStreamConns = 16
	benchPingConns   = 16
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

// benchWorkloads are the workloads --workloads names, in table order.
var benchWorkloads = []string{"rtt", "stream", "http", "idle"}

// parseWorkloads parses "rtt,idle" into a set.
func parseWorkloads(s string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(strings.ToLower(f))
		if f == "" {
			continue
		}
		if !slices.Contains(benchWorkloads, f) {
			return nil, fmt.Errorf("unknown workload %q (want %s)", f, strings.Join(benchWorkloads, ", "))
		}
		out[f] = true
	}
	if len(out) == 0 {
		return nil, errors.New("no workloads")
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

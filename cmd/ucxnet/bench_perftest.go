package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/ucxnet/ucxnet/ucxnet"
)

// perftestReport is UCX's own ceiling as ucx_perftest measures it, and
// ucxnet's fraction of it.
type perftestReport struct {
	Error string `json:"error,omitempty"` // why (part of) it did not run
	// LatOneWayUs is ucp_am_lat's one-way latency of 64 B (median, as
	// ucxnet's p50 is; LatOneWayAvgUs is the overall average);
	// RoundTripUs is twice the median, the ceiling for ucxnet's round trip.
	LatOneWayUs    float64 `json:"lat_one_way_us,omitempty"`
	LatOneWayAvgUs float64 `json:"lat_one_way_avg_us,omitempty"`
	RoundTripUs    float64 `json:"round_trip_us,omitempty"`
	// UcxnetP50Us is ucxnet's 64 B round trip p50; LatFraction is
	// RoundTripUs / UcxnetP50Us (1 = as fast as UCX itself).
	UcxnetP50Us float64          `json:"ucxnet_p50_us,omitempty"`
	LatFraction float64          `json:"lat_fraction,omitempty"`
	Streams     []perftestStream `json:"streams,omitempty"`
}

// perftestStream is ucp_am_bw for one message size.
type perftestStream struct {
	Size       int     `json:"size"`
	Iterations int     `json:"iterations"`
	MBps       float64 `json:"mbps,omitempty"` // 10^6 bytes/s (ucx_perftest reports MiB/s)
	UcxnetMBps float64 `json:"ucxnet_mbps,omitempty"`
	Fraction   float64 `json:"fraction,omitempty"` // UcxnetMBps / MBps
	// PeerMBps is ucp_am_bw in the mode ucxnet runs UCX in: peer error
	// handling (-e), eager protocols only (UCX_RNDV_THRESH=inf) and the
	// UCX settings ucxnet applies (segment sizes, UCX_MM_ERROR_HANDLING=y,
	// which rules out cma).
	PeerMBps     float64 `json:"peer_mbps,omitempty"`
	PeerFraction float64 `json:"peer_fraction,omitempty"` // UcxnetMBps / PeerMBps
	Error        string  `json:"error,omitempty"`
}

// runPerftest runs ucx_perftest's ucp_am_lat (64 B) and ucp_am_bw (each
// stream size) with this process's environment, one server per test (the
// server exits after one test), and compares ucxnet's results with them.
// Failures are recorded in the report, not returned.
func runPerftest(ctx context.Context, path string, o benchOptions, rep *benchReport, prog func(string)) *perftestReport {
	pr := &perftestReport{}
	var errs []string

	prog("ucp_am_lat 64 B")
	if f, err := perftestOnce(ctx, path, "ucp_am_lat", benchPingSize, 20000, 2000, false); err != nil {
		errs = append(errs, "ucp_am_lat: "+err.Error())
	} else {
		pr.LatOneWayUs = f.latP50
		pr.LatOneWayAvgUs = f.latOverall
		if pr.LatOneWayUs <= 0 {
			pr.LatOneWayUs = f.latOverall
		}
		pr.RoundTripUs = 2 * pr.LatOneWayUs
		if v := rep.row("rtt_p50_us", "", "", "").Values["ucx"]; v > 0 {
			pr.UcxnetP50Us = v
			pr.LatFraction = pr.RoundTripUs / v
		}
	}
	for _, size := range o.sizes {
		if ctx.Err() != nil {
			break
		}
		// About a GB per second of --duration, within sane bounds.
		iters := int(o.duration.Seconds() * 1e9 / float64(size))
		iters = min(max(iters, 1000), 500000)
		warm := max(iters/10, 10)
		prog(fmt.Sprintf("ucp_am_bw %s x %d", fmtSize(size), iters))
		s := perftestStream{Size: size, Iterations: iters}
		s.UcxnetMBps = rep.row(streamKey(size, 1), "", "", "").Values["ucx"]
		// bw runs ucp_am_bw in one mode and returns its MB/s and ucxnet's
		// fraction of it (0 if ucxnet was not measured).
		bw := func(peer bool, name string) (mbps, fraction float64, err error) {
			f, err := perftestOnce(ctx, path, "ucp_am_bw", size, iters, warm, peer)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s %s: %v", name, fmtSize(size), err))
				return 0, 0, err
			}
			mbps = f.bwOverallMiB * (1 << 20) / 1e6
			return mbps, s.UcxnetMBps / mbps, nil
		}
		var err error
		if s.MBps, s.Fraction, err = bw(false, "ucp_am_bw"); err != nil {
			s.Error = err.Error()
		}
		prog(fmt.Sprintf("ucp_am_bw -e %s x %d", fmtSize(size), iters))
		s.PeerMBps, s.PeerFraction, _ = bw(true, "ucp_am_bw -e")
		pr.Streams = append(pr.Streams, s)
	}
	pr.Error = strings.Join(errs, "; ")
	return pr
}

// perftestFinal is the "Final:" line of ucx_perftest.
type perftestFinal struct {
	iters                  int
	latP50, latAvg         float64 // usec
	latOverall             float64 // usec
	bwAvgMiB, bwOverallMiB float64 // MiB/s (ucx_perftest's "MB/s")
}

// perftestOnce runs one ucx_perftest test: a server on a free port and a
// client against it. Both are killed if still running when it returns.
// peer runs it as ucxnet runs UCX: peer error handling, eager only (see
// perftestStream.PeerMBps).
func perftestOnce(ctx context.Context, path, test string, size, iters, warmup int, peer bool) (perftestFinal, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	port, err := freePort()
	if err != nil {
		return perftestFinal{}, err
	}
	var sout bytes.Buffer
	var extra, env []string
	if peer {
		extra = []string{"-e"}
		env = os.Environ()
		set := map[string]string{"UCX_RNDV_THRESH": "inf"}
		for k, v := range ucxnet.EffectiveUCXDefaults() {
			set[k] = v
		}
		for k, v := range set {
			if _, ok := os.LookupEnv(k); !ok {
				env = append(env, k+"="+v)
			}
		}
	}
	srv := exec.CommandContext(ctx, path, append([]string{"-p", strconv.Itoa(port)}, extra...)...)
	srv.Env = env
	srv.Stdout, srv.Stderr = &sout, &sout
	srv.WaitDelay = time.Second
	setChildAttrs(srv)
	if err := srv.Start(); err != nil {
		return perftestFinal{}, fmt.Errorf("starting the server: %w", err)
	}
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Wait() }()
	defer func() {
		select {
		case <-srvDone:
		case <-time.After(2 * time.Second):
			srv.Process.Kill()
			<-srvDone
		}
	}()

	args := append([]string{"127.0.0.1", "-p", strconv.Itoa(port), "-t", test,
		"-s", strconv.Itoa(size), "-n", strconv.Itoa(iters), "-w", strconv.Itoa(warmup)}, extra...)
	// The server has no readiness signal: retry while it refuses.
	var out []byte
	for attempt := 0; ; attempt++ {
		cli := exec.CommandContext(ctx, path, args...)
		cli.Env = env
		cli.WaitDelay = time.Second
		setChildAttrs(cli)
		out, err = cli.CombinedOutput()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return perftestFinal{}, fmt.Errorf("%s %s: %w", path, strings.Join(args, " "), ctx.Err())
		}
		select {
		case serr := <-srvDone:
			srvDone <- serr // for the deferred wait
			return perftestFinal{}, fmt.Errorf("server exited (%v): %s", serr, lastLines(sout.String(), 3))
		default:
		}
		if attempt < 50 && bytes.Contains(out, []byte("Connection refused")) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		return perftestFinal{}, fmt.Errorf("%s %s: %v: %s", path, strings.Join(args, " "), err, lastLines(string(out), 3))
	}
	f, err := parsePerftest(out)
	if err != nil {
		return f, fmt.Errorf("%v; output: %s", err, lastLines(string(out), 3))
	}
	return f, nil
}

// parsePerftest finds the "Final:" line:
//
//	Final:  ITERS  LAT_P50  LAT_AVG  LAT_OVERALL  BW_AVG  BW_OVERALL  RATE_AVG  RATE_OVERALL
func parsePerftest(out []byte) (perftestFinal, error) {
	var f perftestFinal
	for _, line := range strings.Split(string(out), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "Final:")
		if !ok {
			continue
		}
		fs := strings.Fields(rest)
		if len(fs) < 6 {
			return f, fmt.Errorf("short Final line %q", line)
		}
		var vals [6]float64
		for i := range vals {
			v, err := strconv.ParseFloat(strings.ReplaceAll(fs[i], ",", ""), 64)
			if err != nil {
				return f, fmt.Errorf("final line %q: %v", line, err)
			}
			vals[i] = v
		}
		f = perftestFinal{iters: int(vals[0]), latP50: vals[1], latAvg: vals[2], latOverall: vals[3], bwAvgMiB: vals[4], bwOverallMiB: vals[5]}
		if f.latOverall <= 0 && f.bwOverallMiB <= 0 {
			return f, fmt.Errorf("final line %q has no results", line)
		}
		return f, nil
	}
	return f, errors.New("no Final line in ucx_perftest's output")
}

// freePort returns a TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// printPerftest prints UCX's ceiling and ucxnet's fraction of it.
func printPerftest(w io.Writer, r *benchReport) {
	p := r.Perftest
	fmt.Fprintf(w, "UCX's own ceiling (ucx_perftest, same environment; ucxnet ucx vs it, 100%% = as fast as raw UCX):\n")
	if p.LatOneWayUs > 0 {
		line := fmt.Sprintf("  %-30s ucp_am_lat one-way p50 %.2f µs (avg %.2f), x2 = %.2f µs", "64 B round trip p50", p.LatOneWayUs, p.LatOneWayAvgUs, p.RoundTripUs)
		if p.LatFraction > 0 {
			line += fmt.Sprintf("   ucxnet p50 %.1f µs = %.1f%% of UCX speed", p.UcxnetP50Us, 100*p.LatFraction)
		}
		fmt.Fprintln(w, line)
	}
	for _, s := range p.Streams {
		if s.MBps <= 0 {
			continue
		}
		line := fmt.Sprintf("  %-30s ucp_am_bw %8.0f MB/s", "stream "+fmtSize(s.Size)+" writes, 1 conn", s.MBps)
		if s.Fraction > 0 {
			line += fmt.Sprintf("                 ucxnet %.0f MB/s = %.1f%% of it", s.UcxnetMBps, 100*s.Fraction)
		}
		fmt.Fprintln(w, line)
		if s.PeerMBps > 0 {
			line := fmt.Sprintf("  %-30s ucp_am_bw %8.0f MB/s", "  same, as ucxnet runs UCX *", s.PeerMBps)
			if s.PeerFraction > 0 {
				line += fmt.Sprintf("                 ucxnet %.0f MB/s = %.1f%% of it", s.UcxnetMBps, 100*s.PeerFraction)
			}
			fmt.Fprintln(w, line)
		}
	}
	fmt.Fprintln(w, "  * with peer error handling (-e), eager protocols only (UCX_RNDV_THRESH=inf) and the UCX settings ucxnet applies (ucxnet info)")
	if p.Error != "" {
		fmt.Fprintf(w, "  ucx_perftest failed: %s\n", p.Error)
	}
}

//go:build linux

package ucxgrpc_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	ucxgrpc "github.com/ucxnet/ucxnet/compat/grpc"
	"github.com/ucxnet/ucxnet/registry"
	"github.com/ucxnet/ucxnet/ucxnet"
)

// Cross-process gRPC benchmark: the server runs in a child process (this
// test binary re-executed as TestHelperBenchServer), the client in this
// one, over ucxnet (the current UCX_TLS) and over Go's TCP loopback, in
// interleaved rounds. Run it with
//
//	UCX_TLS=sm go test -run '^$' -bench MultiProcess -benchtime 1x ./compat/grpc/
//
// $UCXGRPC_BENCH_ROUNDS (default 5) and $UCXGRPC_BENCH_DURATION (default
// 500ms, per measurement) size it. It reports medians over the rounds and
// the median of the per-round ratios, oriented so that >1 means ucxnet is
// better.

// benchServerEnv, when set, makes TestHelperBenchServer serve.
const benchServerEnv = "UCXGRPC_TEST_BENCH_SERVER"

// TestHelperBenchServer is the server process of BenchmarkMultiProcess:
// one gRPC server with the test service on a ucxnet listener (registry
// from UCXNET_REGISTRY) and a TCP loopback listener. It prints
// "READY <ucx name> <tcp address>" and serves until its stdin closes.
func TestHelperBenchServer(t *testing.T) {
	if os.Getenv(benchServerEnv) == "" {
		t.Skip("helper process of BenchmarkMultiProcess")
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "bench helper:", err)
		os.Exit(2)
	}
	tr, err := ucxnet.NewTransport(ucxnet.Config{})
	if err != nil {
		fail(err)
	}
	uln, err := ucxgrpc.Listen("", ucxgrpc.WithTransport(tr), ucxgrpc.WithService("bench"))
	if err != nil {
		fail(err)
	}
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(maxMsg), grpc.MaxSendMsgSize(maxMsg))
	testgrpc.RegisterTestServiceServer(srv, newTestServer(uln.Addr().String()))
	go srv.Serve(uln)
	go srv.Serve(tln)
	fmt.Printf("READY %s %s\n", uln.Addr(), tln.Addr())
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// startBenchServer starts the helper and returns a client per transport.
func startBenchServer(b *testing.B) map[string]testgrpc.TestServiceClient {
	dir := b.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBenchServer$", "-test.count=1", "-test.bench=^$")
	cmd.Env = append(os.Environ(), benchServerEnv+"=1", registry.EnvRegistry+"=dir:"+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	ready := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				ready <- strings.Fields(rest)
			}
		}
	}()
	go func() {
		cmd.Wait()
		close(exited)
	}()
	b.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(2 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	var addrs []string
	select {
	case addrs = <-ready:
	case <-exited:
		b.Fatalf("bench helper exited before it was ready: %s", stderr.String())
	case <-time.After(60 * time.Second):
		b.Fatal("bench helper not ready after 60s")
	}
	if len(addrs) != 2 {
		b.Fatalf("bench helper said READY %v", addrs)
	}
	reg, err := registry.NewDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	d := &ucxnet.Dialer{Transport: newTransport(b, reg), Timeout: 10 * time.Second}
	ucc := dial(b, "passthrough:///"+addrs[0], grpc.WithContextDialer(ucxgrpc.ContextDialer(d)))
	tcc := dial(b, "passthrough:///"+addrs[1])
	return map[string]testgrpc.TestServiceClient{
		"ucx": testgrpc.NewTestServiceClient(ucc),
		"tcp": testgrpc.NewTestServiceClient(tcc),
	}
}

func benchEnvInt(name string, dflt int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return dflt
}

func benchEnvDuration(name string, dflt time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return dflt
}

// unaryFor runs 64-byte unary calls from callers goroutines for d and
// returns the p50 latency (µs) and the calls per second.
func unaryFor(c testgrpc.TestServiceClient, callers int, d time.Duration) (p50, qps float64, err error) {
	req := &testgrpc.SimpleRequest{ResponseSize: 64, Payload: &testgrpc.Payload{Body: pattern(64)}}
	ctx := context.Background()
	for range 20 { // warm up
		if _, err := c.UnaryCall(ctx, req); err != nil {
			return 0, 0, err
		}
	}
	var (
		stop  atomic.Bool
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	lat := make([][]time.Duration, callers)
	start := time.Now()
	tm := time.AfterFunc(d, func() { stop.Store(true) })
	defer tm.Stop()
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				t0 := time.Now()
				if _, err := c.UnaryCall(ctx, req); err != nil {
					mu.Lock()
					first = cmp(first, err)
					mu.Unlock()
					stop.Store(true)
					return
				}
				lat[g] = append(lat[g], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if first != nil {
		return 0, 0, first
	}
	all := slices.Concat(lat...)
	if len(all) == 0 {
		return 0, 0, fmt.Errorf("no call finished in %v", d)
	}
	slices.Sort(all)
	return float64(all[len(all)/2].Nanoseconds()) / 1e3, float64(len(all)) / el.Seconds(), nil
}

// pacedFor makes 64-byte unary calls from one caller at a fixed rate
// (calls per second) for d, each started on its schedule (at once if the
// last one ran late), and returns the p50 and p99 latency (µs): requests
// spaced in time, with both processes idle in between.
func pacedFor(c testgrpc.TestServiceClient, rate int, d time.Duration) (p50, p99 float64, err error) {
	req := &testgrpc.SimpleRequest{ResponseSize: 64, Payload: &testgrpc.Payload{Body: pattern(64)}}
	ctx := context.Background()
	for range 20 { // warm up
		if _, err := c.UnaryCall(ctx, req); err != nil {
			return 0, 0, err
		}
	}
	every := time.Second / time.Duration(rate)
	var lat []time.Duration
	start := time.Now()
	for next := start; next.Sub(start) < d; next = next.Add(every) {
		time.Sleep(time.Until(next))
		t0 := time.Now()
		if _, err := c.UnaryCall(ctx, req); err != nil {
			return 0, 0, err
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	at := func(p int) float64 { return float64(lat[min(len(lat)*p/100, len(lat)-1)].Nanoseconds()) / 1e3 }
	return at(50), at(99), nil
}

// streamFor sends 1 MiB messages on one client stream for d and returns
// MB/s (10^6 bytes), timed to the server's answer.
func streamFor(c testgrpc.TestServiceClient, d time.Duration) (float64, error) {
	const size = 1 << 20
	msg := &testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: pattern(size)}}
	start := time.Now()
	stream, err := c.StreamingInputCall(context.Background())
	if err != nil {
		return 0, err
	}
	n := 0
	for time.Since(start) < d {
		if err := stream.Send(msg); err != nil {
			return 0, err
		}
		n++
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return 0, err
	}
	el := time.Since(start)
	if uint32(resp.GetAggregatedPayloadSize()) != uint32(n*size) {
		return 0, fmt.Errorf("server got %d bytes, want %d", resp.GetAggregatedPayloadSize(), n*size)
	}
	return float64(n*size) / el.Seconds() / 1e6, nil
}

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkMultiProcess measures, client and server in separate processes,
// each over ucxnet and over TCP loopback in the same interleaved rounds:
//
//   - unary1: 64 B unary calls, 1 caller: p50 latency (ratio tcp/ucx);
//   - unary64: 64 concurrent callers on one ClientConn: QPS (ucx/tcp);
//   - paced1k-p50, paced1k-p99: 64 B unary calls from 1 caller at a fixed
//     1,000 calls/s, latency p50 and p99 (tcp/ucx): requests spaced in
//     time, the processes idle in between;
//   - stream1MiB: 1 MiB client-streaming messages: MB/s (ucx/tcp).
//
// Each sub-benchmark runs its rounds once, whatever b.N (use -benchtime 1x).
func BenchmarkMultiProcess(b *testing.B) {
	clients := startBenchServer(b)
	rounds := benchEnvInt("UCXGRPC_BENCH_ROUNDS", 5)
	d := benchEnvDuration("UCXGRPC_BENCH_DURATION", 500*time.Millisecond)
	type workload struct {
		name, unit  string
		lowerBetter bool
		measure     func(testgrpc.TestServiceClient) (float64, error)
	}
	for _, w := range []workload{
		{"unary1", "p50-µs", true, func(c testgrpc.TestServiceClient) (float64, error) {
			p50, _, err := unaryFor(c, 1, d)
			return p50, err
		}},
		{"unary64", "qps", false, func(c testgrpc.TestServiceClient) (float64, error) {
			_, qps, err := unaryFor(c, 64, d)
			return qps, err
		}},
		{"paced1k-p50", "µs", true, func(c testgrpc.TestServiceClient) (float64, error) {
			p50, _, err := pacedFor(c, 1000, d)
			return p50, err
		}},
		{"paced1k-p99", "µs", true, func(c testgrpc.TestServiceClient) (float64, error) {
			_, p99, err := pacedFor(c, 1000, d)
			return p99, err
		}},
		{"stream1MiB", "MB/s", false, func(c testgrpc.TestServiceClient) (float64, error) {
			return streamFor(c, d)
		}},
	} {
		b.Run(w.name, func(b *testing.B) {
			vals := map[string][]float64{}
			var ratios []float64
			for r := range rounds {
				order := []string{"ucx", "tcp"}
				if r%2 == 1 {
					order = []string{"tcp", "ucx"}
				}
				got := map[string]float64{}
				for _, tr := range order {
					v, err := w.measure(clients[tr])
					if err != nil {
						b.Fatalf("%s, round %d: %v", tr, r, err)
					}
					got[tr] = v
					vals[tr] = append(vals[tr], v)
				}
				if w.lowerBetter {
					ratios = append(ratios, got["tcp"]/got["ucx"])
				} else {
					ratios = append(ratios, got["ucx"]/got["tcp"])
				}
			}
			dir := "ucx/tcp"
			if w.lowerBetter {
				dir = "tcp/ucx"
			}
			b.ReportMetric(median(vals["ucx"]), "ucx-"+w.unit)
			b.ReportMetric(median(vals["tcp"]), "tcp-"+w.unit)
			b.ReportMetric(median(ratios), dir)
			b.ReportMetric(slices.Min(ratios), dir+"-min")
			b.ReportMetric(slices.Max(ratios), dir+"-max")
			b.Logf("%s over %d rounds of %v: ucx %.4g, tcp %.4g %s (medians); %s per round %.2f",
				w.name, rounds, d, median(vals["ucx"]), median(vals["tcp"]), w.unit, dir, ratios)
		})
	}
}

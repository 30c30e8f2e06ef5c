package ucxgrpc_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// benchClients returns a TestService client over ucxnet (current UCX_TLS)
// and one over Go's TCP loopback, each with its own server.
func benchClients(b *testing.B) map[string]testgrpc.TestServiceClient {
	e := newEnv(b, nil)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(maxMsg), grpc.MaxSendMsgSize(maxMsg))
	testgrpc.RegisterTestServiceServer(srv, newTestServer("tcp"))
	go srv.Serve(ln)
	b.Cleanup(srv.Stop)
	cc := dial(b, "passthrough:///"+ln.Addr().String())
	return map[string]testgrpc.TestServiceClient{"ucx": e.client, "tcp": testgrpc.NewTestServiceClient(cc)}
}

type unaryResult struct{ p50, p99, qps float64 }

// BenchmarkUnary measures 64-byte unary calls with 1 and 64 concurrent
// callers on one ClientConn, over ucxnet and over TCP loopback, and
// reports latency percentiles (µs), QPS, and the ucx/tcp ratios in a
// final "ratio" sub-benchmark (latency ratio < 1 and qps ratio > 1 mean
// ucxnet is faster).
func BenchmarkUnary(b *testing.B) {
	clients := benchClients(b)
	for _, callers := range []int{1, 64} {
		results := map[string]unaryResult{}
		for _, tr := range []string{"ucx", "tcp"} {
			c := clients[tr]
			b.Run(fmt.Sprintf("callers=%d/%s", callers, tr), func(b *testing.B) {
				req := &testgrpc.SimpleRequest{ResponseSize: 64, Payload: &testgrpc.Payload{Body: pattern(64)}}
				ctx := context.Background()
				if _, err := c.UnaryCall(ctx, req); err != nil { // warm up
					b.Fatal(err)
				}
				lat := make([][]time.Duration, callers)
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				start := time.Now()
				for g := range callers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for next.Add(1) <= int64(b.N) {
							t0 := time.Now()
							if _, err := c.UnaryCall(ctx, req); err != nil {
								b.Error(err)
								return
							}
							lat[g] = append(lat[g], time.Since(t0))
						}
					}()
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				all := slices.Concat(lat...)
				slices.Sort(all)
				if len(all) == 0 {
					return
				}
				r := unaryResult{
					p50: float64(all[len(all)/2].Nanoseconds()) / 1e3,
					p99: float64(all[len(all)*99/100].Nanoseconds()) / 1e3,
					qps: float64(len(all)) / elapsed.Seconds(),
				}
				results[tr] = r
				b.ReportMetric(r.p50, "p50-µs")
				b.ReportMetric(r.p99, "p99-µs")
				b.ReportMetric(r.qps, "qps")
			})
		}
		b.Run(fmt.Sprintf("callers=%d/ratio", callers), func(b *testing.B) {
			u, t := results["ucx"], results["tcp"]
			if u.qps == 0 || t.qps == 0 {
				b.Skip("needs both ucx and tcp results")
			}
			for range b.N {
			}
			b.ReportMetric(u.p50/t.p50, "p50-ucx/tcp")
			b.ReportMetric(u.p99/t.p99, "p99-ucx/tcp")
			b.ReportMetric(u.qps/t.qps, "qps-ucx/tcp")
		})
	}
}

// BenchmarkStream measures client-streaming throughput with 1 MiB
// messages over ucxnet and over TCP loopback, and the ucx/tcp ratio.
func BenchmarkStream(b *testing.B) {
	const size = 1 << 20
	clients := benchClients(b)
	results := map[string]float64{}
	for _, tr := range []string{"ucx", "tcp"} {
		c := clients[tr]
		b.Run(tr, func(b *testing.B) {
			msg := &testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: pattern(size)}}
			b.SetBytes(size)
			b.ResetTimer()
			start := time.Now()
			stream, err := c.StreamingInputCall(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			for range b.N {
				if err := stream.Send(msg); err != nil {
					b.Fatal(err)
				}
			}
			resp, err := stream.CloseAndRecv()
			if err != nil && err != io.EOF {
				b.Fatal(err)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			// The total is an int32 on the wire: compare modulo 2^32.
			if uint32(resp.GetAggregatedPayloadSize()) != uint32(b.N*size) {
				b.Fatalf("server got %d bytes, want %d", resp.GetAggregatedPayloadSize(), b.N*size)
			}
			results[tr] = float64(b.N*size) / elapsed.Seconds() / 1e6
		})
	}
	b.Run("ratio", func(b *testing.B) {
		if results["ucx"] == 0 || results["tcp"] == 0 {
			b.Skip("needs both ucx and tcp results")
		}
		for range b.N {
		}
		b.ReportMetric(results["ucx"], "ucx-MB/s")
		b.ReportMetric(results["tcp"], "tcp-MB/s")
		b.ReportMetric(results["ucx"]/results["tcp"], "MB/s-ucx/tcp")
	})
}

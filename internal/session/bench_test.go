package session

import (
	"fmt"
	"io"
	"net"
	"runtime"
	"sort"
	"syscall"
	"testing"
	"time"
)

// Benchmarks compare ucxnet (with the current UCX_TLS) against Go's TCP
// loopback in the same run; both ends are in this process (ucxnet's on two
// transports, so real UCX transports carry the bytes). The bench command
// (`ucxnet bench`) measures across processes.

func tcpPair(b *testing.B) (net.Conn, net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	return c, <-ch
}

func benchPairs(b *testing.B, f func(b *testing.B, c, s net.Conn)) {
	b.Run("ucx", func(b *testing.B) {
		p := newPair(b, Config{})
		c, s := p.conns(b)
		defer c.Close()
		defer s.Close()
		f(b, c, s)
	})
	b.Run("tcp", func(b *testing.B) {
		c, s := tcpPair(b)
		defer c.Close()
		defer s.Close()
		f(b, c, s)
	})
}

func BenchmarkStream(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dK", size>>10), func(b *testing.B) {
			benchPairs(b, func(b *testing.B, c, s net.Conn) {
				buf := make([]byte, size)
				done := make(chan int64)
				go func() {
					n, _ := io.CopyBuffer(io.Discard, s, make([]byte, 256<<10))
					done <- n
				}()
				b.SetBytes(int64(size))
				b.ResetTimer()
				for range b.N {
					if _, err := c.Write(buf); err != nil {
						b.Fatal(err)
					}
				}
				if cw, ok := c.(interface{ CloseWrite() error }); ok {
					cw.CloseWrite()
				}
				if n := <-done; n != int64(size)*int64(b.N) {
					b.Fatalf("received %d bytes, want %d", n, size*b.N)
				}
			})
		})
	}
}

// BenchmarkSmallWrite streams 64-byte writes: the per-write cost of the
// write path (window, backlog checks, coalescing) more than of the bytes.
func BenchmarkSmallWrite(b *testing.B) {
	benchPairs(b, func(b *testing.B, c, s net.Conn) {
		buf := make([]byte, 64)
		done := make(chan int64)
		go func() {
			n, _ := io.CopyBuffer(io.Discard, s, make([]byte, 256<<10))
			done <- n
		}()
		b.SetBytes(int64(len(buf)))
		b.ResetTimer()
		for range b.N {
			if _, err := c.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		if n := <-done; n != int64(len(buf))*int64(b.N) {
			b.Fatalf("received %d bytes, want %d", n, len(buf)*b.N)
		}
	})
}

func BenchmarkPingPong(b *testing.B) {
	benchPairs(b, func(b *testing.B, c, s net.Conn) {
		go func() {
			buf := make([]byte, 64)
			for {
				if _, err := io.ReadFull(s, buf); err != nil {
					return
				}
				if _, err := s.Write(buf); err != nil {
					return
				}
			}
		}()
		buf := make([]byte, 64)
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			t0 := time.Now()
			if _, err := c.Write(buf); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
	})
}

// BenchmarkIdleConns holds n idle conns open (both ends in this process)
// and reports the memory each costs and the CPU the process burns while
// they sit idle. Run with -benchtime=1x and UCXNET_DEBUG_OWNERS=0.
func BenchmarkIdleConns(b *testing.B) {
	if checkOwners {
		b.Log("the ownership checks are on (owner.go; UCXNET_DEBUG_OWNERS=0 turns them off): their tracebacks add to the idle CPU")
	}
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			p := newPair(b, Config{})
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			conns := make([]net.Conn, 0, 2*n)
			for range n {
				c, s := p.conns(b)
				conns = append(conns, c, s)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/float64(n), "heap-B/conn-pair")
			var r0, r1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
			const idle = 3 * time.Second
			time.Sleep(idle)
			syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
			cpu := time.Duration(r1.Utime.Nano()+r1.Stime.Nano()-r0.Utime.Nano()-r0.Stime.Nano()) * time.Nanosecond
			b.ReportMetric(100*cpu.Seconds()/idle.Seconds(), "idle-cpu-%")
			for _, c := range conns {
				c.Close()
			}
		})
	}
}

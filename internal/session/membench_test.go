package session

import (
	"fmt"
	"io"
	"testing"
)

// BenchmarkMemStream streams writes of each size over the in-memory
// engine: the Go path of Write, dispatch and Read alone, without UCX's
// cost or noise, allocations included (compare two builds with it).
func BenchmarkMemStream(b *testing.B) {
	for _, size := range []int{64, 4 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			p := newMemPair(b, Config{})
			c, s := p.conns(b)
			defer c.Close()
			defer s.Close()
			buf := make([]byte, size)
			done := make(chan int64)
			go func() {
				n, _ := io.CopyBuffer(io.Discard, s, make([]byte, 256<<10))
				done <- n
			}()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			c.(*testConn).CloseWrite()
			if n := <-done; n != int64(size)*int64(b.N) {
				b.Fatalf("received %d bytes, want %d", n, size*b.N)
			}
		})
	}
}

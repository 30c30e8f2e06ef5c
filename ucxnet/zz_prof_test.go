package ucxnet

import (
	"io"
	"net"
	"sync"
	"testing"
)

func BenchmarkZZMulti(b *testing.B) {
	const conns, size = 16, 4 << 10
	run := func(b *testing.B, pairs [][2]net.Conn) {
		per := int64(b.N) * size / conns
		if per < size {
			per = size
		}
		b.SetBytes(per * conns / int64(b.N))
		var wg sync.WaitGroup
		b.ResetTimer()
		for _, pr := range pairs {
			wg.Add(2)
			go func() {
				defer wg.Done()
				buf := make([]byte, size)
				for w := int64(0); w < per; w += size {
					pr[0].Write(buf)
				}
			}()
			go func() {
				defer wg.Done()
				io.CopyN(io.Discard, pr[1], per)
			}()
		}
		wg.Wait()
	}
	b.Run("ucx", func(b *testing.B) {
		p := newPair(b, Config{})
		var pairs [][2]net.Conn
		for range conns {
			c, s := p.conns(b)
			pairs = append(pairs, [2]net.Conn{c, s})
		}
		run(b, pairs)
	})
	b.Run("tcp", func(b *testing.B) {
		var pairs [][2]net.Conn
		for range conns {
			c, s := tcpPair(b)
			pairs = append(pairs, [2]net.Conn{c, s})
		}
		run(b, pairs)
	})
}

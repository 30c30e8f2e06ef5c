package ucxnet

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/nettest"

	"github.com/ucxnet/ucxnet/registry"
)

// pair is two transports sharing an in-process registry, so both ends of a
// conn run in this process over real UCX transports.
type pair struct {
	server, client *Transport
	ln             net.Listener
	dialer         *Dialer
}

func newPair(t testing.TB, cfg Config) *pair {
	t.Helper()
	if cfg.Registry == nil {
		cfg.Registry = registry.NewMemory()
	}
	s, err := NewTransport(cfg)
	require.NoError(t, err)
	c, err := NewTransport(cfg)
	require.NoError(t, err)
	lc := ListenConfig{Transport: s}
	ln, err := lc.Listen(t.Context(), Network, "")
	require.NoError(t, err)
	p := &pair{server: s, client: c, ln: ln, dialer: &Dialer{Transport: c, Timeout: 10 * time.Second}}
	t.Cleanup(func() {
		ln.Close()
		c.Close()
		s.Close()
	})
	return p
}

func (p *pair) conns(t testing.TB) (client, server net.Conn) {
	t.Helper()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := p.ln.Accept()
		ch <- res{c, err}
	}()
	client, err := p.dialer.Dial(Network, p.ln.Addr().String())
	require.NoError(t, err)
	r := <-ch
	require.NoError(t, r.err)
	return client, r.c
}

func TestEcho(t *testing.T) {
	p := newPair(t, Config{})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	go io.Copy(s, s)
	for _, n := range []int{1, 100, 8 << 10, 100 << 10, 3 << 20} {
		msg := make([]byte, n)
		rand.Read(msg)
		go func() { c.Write(msg) }()
		got := make([]byte, n)
		_, err := io.ReadFull(c, got)
		require.NoError(t, err)
		require.True(t, bytes.Equal(msg, got), "size %d", n)
	}
	require.Equal(t, Network, c.LocalAddr().Network())
	require.NotNil(t, c.RemoteAddr())
	t.Logf("transports: %v", c.(*Conn).Transports())
}

func TestCloseDeliversThenEOF(t *testing.T) {
	p := newPair(t, Config{Window: 64 << 10})
	c, s := p.conns(t)
	msg := make([]byte, 1<<20)
	rand.Read(msg)
	done := make(chan error, 1)
	go func() {
		_, err := c.Write(msg)
		if err == nil {
			err = c.Close()
		}
		done <- err
	}()
	got, err := io.ReadAll(s)
	require.NoError(t, err)
	require.True(t, bytes.Equal(msg, got))
	require.NoError(t, <-done)
	s.Close()
}

func TestRefused(t *testing.T) {
	p := newPair(t, Config{})
	start := time.Now()
	_, err := p.dialer.Dial(Network, "nobody-listens-here")
	require.Error(t, err)
	require.True(t, errors.Is(err, syscall.ECONNREFUSED), "%v", err)
	var op *net.OpError
	require.ErrorAs(t, err, &op)
	require.Less(t, time.Since(start), time.Second)
}

func TestDeadline(t *testing.T) {
	p := newPair(t, Config{})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := c.Read(make([]byte, 10))
	require.True(t, errors.Is(err, os.ErrDeadlineExceeded))
	require.True(t, err.(net.Error).Timeout())
}

func TestNetTest(t *testing.T) {
	p := newPair(t, Config{Window: 256 << 10})
	var mu sync.Mutex
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		mu.Lock()
		defer mu.Unlock()
		c1, c2 = p.conns(t)
		return c1, c2, func() { c1.Close(); c2.Close() }, nil
	})
}

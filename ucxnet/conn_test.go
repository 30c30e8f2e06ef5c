package ucxnet

import (
	"bytes"
	"context"
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
)

func TestEcho(t *testing.T) { forEachEngine(t, Config{}, testEcho) }

func testEcho(t *testing.T, p *pair) {
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
	forEachEngine(t, Config{Window: 64 << 10}, testCloseDeliversThenEOF)
}

func testCloseDeliversThenEOF(t *testing.T, p *pair) {
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
	forEachEngine(t, Config{}, func(t *testing.T, p *pair) {
		_, err := p.dialer.Dial(Network, "nobody-listens-here")
		requirePromptRefusal(t, err)
	})
}

// requirePromptRefusal checks that a dial was refused for a cause found at
// once (no listener, a dead peer, a refusal), not given up on: a
// *net.OpError matching ECONNREFUSED that is no timeout, and not the
// refusal of a dial that waited for an answer (twice KeepAlive). It
// asserts the cause rather than the time taken, which a loaded machine
// stretches.
func requirePromptRefusal(t *testing.T, err error) {
	t.Helper()
	require.True(t, errors.Is(err, syscall.ECONNREFUSED), "%v", err)
	var op *net.OpError
	require.ErrorAs(t, err, &op)
	require.False(t, op.Timeout(), "a timeout, not a refusal: %v", err)
	require.NotContains(t, err.Error(), "no answer", "the dial waited for an answer that never came")
}

func TestDeadline(t *testing.T) { forEachEngine(t, Config{}, testDeadline) }

func testDeadline(t *testing.T, p *pair) {
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := c.Read(make([]byte, 10))
	require.True(t, errors.Is(err, os.ErrDeadlineExceeded))
	require.True(t, err.(net.Error).Timeout())
}

// TestNetTest runs x/net/nettest's conformance suite over both engines,
// through the face.
func TestNetTest(t *testing.T) {
	forEachEngine(t, Config{Window: 256 << 10}, func(t *testing.T, p *pair) {
		var mu sync.Mutex
		nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
			mu.Lock()
			defer mu.Unlock()
			c1, c2 = p.conns(t)
			return c1, c2, func() { c1.Close(); c2.Close() }, nil
		})
	})
}

// A conn of a Transport that NewTransport started runs over UCX (the
// engine the package's init hands the session), and Accept's and Dial's
// conns are *Conn.
func TestUCXWiring(t *testing.T) {
	p := newPair(t, Config{Lane: LaneUCX})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	cc, ok := c.(*Conn)
	require.True(t, ok, "Dial's conn is a %T", c)
	_, ok = s.(*Conn)
	require.True(t, ok, "Accept's conn is a %T", s)
	lane, why := cc.Lane()
	require.Equal(t, LaneUCX, lane, why)
	require.NotEmpty(t, cc.Transports(), "a UCX conn names its UCX transports")
	require.NotEqual(t, []string{"tcp(kernel)"}, cc.Transports())
	require.NotEmpty(t, UCX().Version)
}

// Errors from a conn are *net.OpError with the conn's addresses, as
// *net.TCPConn's are: a Read after Close, a deadline passed, and a Write
// after CloseWrite; io.EOF stays bare.
func TestConnErrors(t *testing.T) {
	forEachEngine(t, Config{}, func(t *testing.T, p *pair) {
		c, s := p.conns(t)
		defer s.Close()
		require.NoError(t, c.SetReadDeadline(time.Unix(1, 0)))
		_, err := c.Read(make([]byte, 1))
		requireOpErr(t, err, "read", c, os.ErrDeadlineExceeded)
		require.NoError(t, c.SetReadDeadline(time.Time{}))
		require.NoError(t, c.(*Conn).CloseWrite())
		_, err = c.Write([]byte("x"))
		requireOpErr(t, err, "write", c, syscall.EPIPE)
		require.NoError(t, s.Close())
		_, err = c.Read(make([]byte, 1))
		require.Equal(t, io.EOF, err)
		require.NoError(t, c.Close())
		_, err = c.Read(make([]byte, 1))
		requireOpErr(t, err, "read", c, net.ErrClosed)
		requireOpErr(t, c.Close(), "close", c, net.ErrClosed)
		requireOpErr(t, c.SetDeadline(time.Time{}), "set", c, net.ErrClosed)
	})
}

// requireOpErr checks that err is a *net.OpError of op on c matching want.
func requireOpErr(t *testing.T, err error, op string, c net.Conn, want error) {
	t.Helper()
	var oe *net.OpError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, op, oe.Op, "%v", err)
	require.Equal(t, Network, oe.Net)
	require.Equal(t, c.LocalAddr(), oe.Source)
	require.Equal(t, c.RemoteAddr(), oe.Addr)
	require.True(t, errors.Is(err, want), "%v is not %v", err, want)
}

// The errors of a dial, a listen, an Accept and a listener's Close are
// *net.OpError, as net's are: Op, Net "ucx" (or the unknown network asked
// for), no Source, and Addr the name dialed or listened on (none for a
// listen on an unknown network). A dial that runs out of time is a
// timeout that matches context.DeadlineExceeded.
func TestListenDialAcceptErrors(t *testing.T) {
	forEachEngine(t, Config{}, func(t *testing.T, p *pair) {
		name := p.ln.Addr().String()
		at := Addr{Name: name}
		_, err := p.dialer.Dial("udp", name)
		requireNameOpErr(t, err, "dial", "udp", at, net.UnknownNetworkError("udp"))
		_, err = p.dialer.Dial(Network, "nobody-listens-here")
		requireNameOpErr(t, err, "dial", Network, Addr{Name: "nobody-listens-here"}, syscall.ECONNREFUSED)
		ctx, cancel := context.WithDeadline(context.Background(), time.Unix(1, 0))
		defer cancel()
		_, err = p.dialer.DialContext(ctx, Network, name)
		requireNameOpErr(t, err, "dial", Network, at, context.DeadlineExceeded)
		require.True(t, err.(net.Error).Timeout(), "%v", err)

		lc := ListenConfig{Transport: p.server}
		_, err = lc.Listen(context.Background(), "udp", name)
		requireNameOpErr(t, err, "listen", "udp", nil, net.UnknownNetworkError("udp"))
		_, err = lc.Listen(context.Background(), Network, name)
		requireNameOpErr(t, err, "listen", Network, at, syscall.EADDRINUSE)

		require.NoError(t, p.ln.Close())
		_, err = p.ln.Accept()
		requireNameOpErr(t, err, "accept", Network, at, net.ErrClosed)
		requireNameOpErr(t, p.ln.Close(), "close", Network, at, net.ErrClosed)
	})
}

// requireNameOpErr checks that err is a *net.OpError of op on network nw
// with addr (nil: none) and no Source, matching want.
func requireNameOpErr(t *testing.T, err error, op, nw string, addr net.Addr, want error) {
	t.Helper()
	var oe *net.OpError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, op, oe.Op, "%v", err)
	require.Equal(t, nw, oe.Net, "%v", err)
	require.Nil(t, oe.Source, "%v", err)
	require.Equal(t, addr, oe.Addr, "%v", err)
	require.ErrorIs(t, err, want)
}

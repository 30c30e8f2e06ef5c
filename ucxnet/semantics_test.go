package ucxnet

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A reader that stops reading bounds what is buffered for it; the writer
// blocks and its deadline fires with n reported exactly.
func TestFlowControlBlocksWriter(t *testing.T) {
	const window = 128 << 10
	forEachEngine(t, Config{Window: window, EagerMax: 16 << 10}, func(t *testing.T, p *pair) {
		c, s := p.conns(t)
		defer c.Close()
		defer s.Close()

		c.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := c.Write(make([]byte, 4<<20))
		require.True(t, errors.Is(err, os.ErrDeadlineExceeded), "%v", err)
		require.True(t, err.(net.Error).Timeout())
		require.LessOrEqual(t, n, window, "wrote past the receive window")
		require.Greater(t, n, 0)

		held := s.(*Conn).Stats().Unread
		require.LessOrEqual(t, held, uint64(window))

		// The timeout is not fatal: reading frees the window and writes go on.
		c.SetWriteDeadline(time.Time{})
		done := make(chan error, 1)
		go func() {
			_, err := c.Write(make([]byte, 1<<20))
			done <- err
		}()
		got, err := io.ReadFull(s, make([]byte, n+1<<20))
		require.NoError(t, err)
		require.Equal(t, n+1<<20, got)
		require.NoError(t, <-done)
	})
}

func TestCloseWriteHalfClose(t *testing.T) {
	forEachEngine(t, Config{}, func(t *testing.T, p *pair) {
		c, s := p.conns(t)
		defer c.Close()
		defer s.Close()
		_, err := c.Write([]byte("request"))
		require.NoError(t, err)
		require.NoError(t, c.(*Conn).CloseWrite())
		got, err := io.ReadAll(s)
		require.NoError(t, err)
		require.Equal(t, "request", string(got))
		// The other direction still works.
		_, err = s.Write([]byte("response"))
		require.NoError(t, err)
		require.NoError(t, s.Close())
		got, err = io.ReadAll(c)
		require.NoError(t, err)
		require.Equal(t, "response", string(got))
		_, err = c.Write([]byte("x"))
		require.True(t, errors.Is(err, syscall.EPIPE), "%v", err)
	})
}

func TestCloseWithUnreadDataResetsPeer(t *testing.T) {
	forEachEngine(t, Config{}, func(t *testing.T, p *pair) {
		c, s := p.conns(t)
		defer c.Close()
		_, err := c.Write([]byte("never read"))
		require.NoError(t, err)
		require.Eventually(t, func() bool { return s.(*Conn).Stats().Unread > 0 }, 5*time.Second, time.Millisecond)
		require.NoError(t, s.Close())
		_, err = c.Read(make([]byte, 10))
		require.True(t, errors.Is(err, syscall.ECONNRESET), "%v", err)
	})
}

func TestLocalCloseErrors(t *testing.T) {
	forEachEngine(t, Config{}, func(t *testing.T, p *pair) {
		c, s := p.conns(t)
		defer s.Close()
		readErr := make(chan error, 1)
		go func() {
			_, err := c.Read(make([]byte, 10))
			readErr <- err
		}()
		time.Sleep(20 * time.Millisecond)
		require.NoError(t, c.Close())
		err := <-readErr
		require.True(t, errors.Is(err, net.ErrClosed), "%v", err)
		_, err = c.Write([]byte("x"))
		require.True(t, errors.Is(err, net.ErrClosed), "%v", err)
		require.True(t, errors.Is(c.Close(), net.ErrClosed))
		var op *net.OpError
		require.ErrorAs(t, err, &op)
		// The peer sees a clean EOF.
		_, err = s.Read(make([]byte, 10))
		require.Equal(t, io.EOF, err)
	})
}

func TestListenerClose(t *testing.T) {
	forEachEngine(t, Config{}, func(t *testing.T, p *pair) {
		name := p.ln.Addr().String()
		acceptErr := make(chan error, 1)
		go func() {
			_, err := p.ln.Accept()
			acceptErr <- err
		}()
		time.Sleep(20 * time.Millisecond)
		require.NoError(t, p.ln.Close())
		err := <-acceptErr
		require.True(t, errors.Is(err, net.ErrClosed), "%v", err)
		_, err = p.ln.Accept()
		require.True(t, errors.Is(err, net.ErrClosed), "%v", err)

		_, err = p.dialer.Dial(Network, name)
		requirePromptRefusal(t, err)
		// The name is free again.
		lc := ListenConfig{Transport: p.server}
		ln2, err := lc.Listen(context.Background(), Network, name)
		require.NoError(t, err)
		ln2.Close()
	})
}

func TestListenNameInUse(t *testing.T) {
	forEachEngine(t, Config{}, func(t *testing.T, p *pair) {
		for _, tr := range []*Transport{p.server, p.client} {
			lc := ListenConfig{Transport: tr}
			_, err := lc.Listen(context.Background(), Network, p.ln.Addr().String())
			require.True(t, errors.Is(err, syscall.EADDRINUSE), "%v", err)
		}
	})
}

func TestNetworks(t *testing.T) {
	forEachEngine(t, Config{}, func(t *testing.T, p *pair) {
		for _, nw := range []string{"ucx", "tcp", "tcp4", "tcp6"} {
			c, s := func() (net.Conn, net.Conn) {
				ch := make(chan net.Conn, 1)
				go func() {
					s, _ := p.ln.Accept()
					ch <- s
				}()
				c, err := p.dialer.Dial(nw, p.ln.Addr().String())
				require.NoError(t, err, nw)
				return c, <-ch
			}()
			c.Close()
			s.Close()
		}
		_, err := p.dialer.Dial("udp", p.ln.Addr().String())
		var op *net.OpError
		require.ErrorAs(t, err, &op)
		var unk net.UnknownNetworkError
		require.ErrorAs(t, err, &unk)
	})
}

// net/http dials "host:port"; a listener named "host" answers.
func TestDialHostPortFallsBackToHost(t *testing.T) {
	forEachEngine(t, Config{}, func(t *testing.T, p *pair) {
		lc := ListenConfig{Transport: p.server}
		ln, err := lc.Listen(context.Background(), Network, "web")
		require.NoError(t, err)
		defer ln.Close()
		go func() {
			if s, err := ln.Accept(); err == nil {
				s.Write([]byte("hi"))
				s.Close()
			}
		}()
		c, err := p.dialer.Dial("tcp", "web:80")
		require.NoError(t, err)
		got, err := io.ReadAll(c)
		require.NoError(t, err)
		require.Equal(t, "hi", string(got))
		c.Close()
	})
}

func TestDialContextCancelled(t *testing.T) {
	forEachEngine(t, Config{}, func(t *testing.T, p *pair) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := p.dialer.DialContext(ctx, Network, p.ln.Addr().String())
		require.ErrorIs(t, err, context.Canceled)
	})
}

func TestServiceName(t *testing.T) {
	forEachEngine(t, Config{}, func(t *testing.T, p *pair) {
		lc := ListenConfig{Transport: p.server, Service: "orders"}
		ln, err := lc.Listen(context.Background(), Network, "orders-1")
		require.NoError(t, err)
		defer ln.Close()
		go func() {
			if s, err := ln.Accept(); err == nil {
				s.Write([]byte(ln.Addr().String()))
				s.Close()
			}
		}()
		c, err := p.dialer.Dial(Network, "orders")
		require.NoError(t, err)
		got, err := io.ReadAll(c)
		require.NoError(t, err)
		require.Equal(t, "orders-1", string(got))
		c.Close()
	})
}

func TestTransportCloseResetsPeers(t *testing.T) {
	forEachEngine(t, Config{}, func(t *testing.T, p *pair) {
		c, s := p.conns(t)
		defer c.Close()
		defer s.Close()
		other := p.newT(Config{Registry: p.server.Registry()})
		d := Dialer{Transport: other}
		oc, err := d.Dial(Network, p.ln.Addr().String())
		require.NoError(t, err)
		os, err := p.ln.Accept()
		require.NoError(t, err)
		require.NoError(t, other.Close())
		_, err = os.Read(make([]byte, 1))
		require.True(t, errors.Is(err, syscall.ECONNRESET), "%v", err)
		_, err = oc.Read(make([]byte, 1))
		require.Error(t, err)
		// Conns on other transports are untouched.
		go c.Write([]byte("still here"))
		buf := make([]byte, 10)
		_, err = io.ReadFull(s, buf)
		require.NoError(t, err)
		require.True(t, bytes.Equal(buf, []byte("still here")))
	})
}

// Many tiny writes to a reader that is not reading all arrive, in order
// (internal/session's Inbound tests check that they cost about their
// bytes: copied and coalesced, not held one UCX descriptor each).
func TestTinyWritesCoalesce(t *testing.T) {
	forEachEngine(t, Config{Window: 64 << 10}, func(t *testing.T, p *pair) {
		c, s := p.conns(t)
		defer c.Close()
		defer s.Close()
		const n = 20000
		for i := range n {
			_, err := c.Write([]byte{byte(i)})
			require.NoError(t, err)
		}
		sc := s.(*Conn)
		require.Eventually(t, func() bool { return sc.Stats().Unread == n }, 10*time.Second, time.Millisecond)
		got := make([]byte, n)
		_, err := io.ReadFull(s, got)
		require.NoError(t, err)
		for i := range got {
			require.Equal(t, byte(i), got[i], "byte %d", i)
		}
	})
}

// SetLinger(0): Close resets the peer instead of a clean EOF, as TCP does.
func TestSetLingerZeroResets(t *testing.T) {
	forEachEngine(t, Config{}, func(t *testing.T, p *pair) {
		c, s := p.conns(t)
		defer s.Close()
		_, err := c.Write([]byte("partial response"))
		require.NoError(t, err)
		require.NoError(t, c.(*Conn).SetLinger(0))
		require.NoError(t, c.Close())
		s.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			_, err = s.Read(make([]byte, 64))
			if err != nil {
				break
			}
		}
		require.True(t, errors.Is(err, syscall.ECONNRESET), "%v", err)
	})
}

package ucxnet

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ucxnet/ucxnet/registry"
)

// Dial accepts a conn's RemoteAddr string (the id is ignored, as a port).
func TestDialConnAddr(t *testing.T) {
	forEachEngine(t, Config{}, func(t *testing.T, p *pair) {
		c, s := p.conns(t)
		defer c.Close()
		defer s.Close()
		go func() {
			if s2, err := p.ln.Accept(); err == nil {
				s2.Close()
			}
		}()
		c2, err := p.dialer.Dial(Network, c.RemoteAddr().String())
		require.NoError(t, err)
		c2.Close()
	})
}

// An answered keepalive PING gives the UCX lane's round trip.
func TestConnStatsRTT(t *testing.T) {
	p := newPair(t, Config{Lane: LaneUCX, KeepAlive: 400 * time.Millisecond})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	require.Eventually(t, func() bool { return c.(*Conn).Stats().RTT > 0 }, 20*time.Second, 10*time.Millisecond,
		"the idle conn's peer is probed after KeepAlive/2 and answers")
}

// Transport.Close closes the registry NewTransport opened from the
// environment: with an HTTP registry (whose lease keepers and idle
// connections are goroutines) nothing is left running afterwards.
func TestTransportClosesItsRegistry(t *testing.T) {
	const token = "transport-close-token"
	srv := registry.NewServer(registry.ServerConfig{Token: token, SweepInterval: 100 * time.Millisecond})
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	t.Setenv(registry.EnvRegistry, ts.URL)
	t.Setenv(registry.EnvRegistryToken, token)
	before := goleak.IgnoreCurrent()

	tr, err := NewTransport(Config{})
	require.NoError(t, err)
	_, isHTTP := tr.Registry().(*registry.HTTP)
	require.True(t, isHTTP, "registry from the environment: %T", tr.Registry())
	lc := ListenConfig{Transport: tr}
	ln, err := lc.Listen(context.Background(), Network, "")
	require.NoError(t, err)
	d := Dialer{Transport: tr, Timeout: 10 * time.Second}
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err := d.Dial(Network, ln.Addr().String())
	require.NoError(t, err)
	c.Close()
	ln.Close()
	require.NoError(t, tr.Close())
	goleak.VerifyNone(t, before)
}

// Stats counts every byte on both lanes, whichever path moves it: an
// echo server whose io.Copy takes the ReadFrom and WriteTo fast paths
// shows the bytes while the copy runs, and exactly what the dialer sent
// once it ends, as the dialer does.
func TestConnStatsCountCopies(t *testing.T) {
	for _, ln := range []string{LaneTCP, ""} {
		t.Run("lane="+ln, func(t *testing.T) {
			forEachEngine(t, Config{Lane: ln}, testConnStatsCountCopies)
		})
	}
}

func testConnStatsCountCopies(t *testing.T, p *pair) {
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	echoed := make(chan error, 1)
	go func() {
		_, err := io.Copy(s, s) // s.WriteTo(s), then s.ReadFrom
		if err == nil {
			err = s.(*Conn).CloseWrite()
		}
		echoed <- err
	}()
	counted := func(want uint64) {
		t.Helper()
		for _, conn := range []net.Conn{c, s} {
			var st ConnStats
			for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
				if st = conn.(*Conn).Stats(); st.BytesIn == want && st.BytesOut == want {
					break
				}
			}
			require.Equal(t, [2]uint64{want, want}, [2]uint64{st.BytesIn, st.BytesOut},
				"dialed=%v lane %s: bytes in and out", st.Dialed, st.Lane)
		}
	}
	const hello = "seventeen bytes!\n"
	_, err := io.Copy(c, strings.NewReader(hello))
	require.NoError(t, err)
	back := make([]byte, len(hello))
	_, err = io.ReadFull(c, back)
	require.NoError(t, err)
	counted(uint64(len(hello))) // while the echo's copy is still running

	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	sent := make(chan error, 1)
	go func() {
		_, err := io.Copy(c, bytes.NewReader(payload))
		if err == nil {
			err = c.(*Conn).CloseWrite()
		}
		sent <- err
	}()
	n, err := io.Copy(io.Discard, c) // c.WriteTo
	require.NoError(t, err)
	require.Equal(t, int64(len(payload)), n)
	require.NoError(t, <-sent)
	require.NoError(t, <-echoed)
	counted(uint64(len(hello) + len(payload)))
}

package ucxnet

import (
	"context"
	"net/http/httptest"
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

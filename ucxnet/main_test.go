package ucxnet

import (
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/engine/memengine"
	"github.com/ucxnet/ucxnet/internal/session"
	"github.com/ucxnet/ucxnet/registry"
)

// TestMain fails the package's tests if goroutines outlive them. The
// default transport, never closed, is started first and its goroutines
// ignored (IgnoreCurrent), as internal/session's TestMain does; every
// transport a test starts is still checked. Transports run two workers
// unless $UCXNET_WORKERS says otherwise, and their stats sockets go to a
// private directory removed with the run.
func TestMain(m *testing.M) {
	cleanup := privateStatsDir()
	if os.Getenv("UCXNET_WORKERS") == "" {
		os.Setenv("UCXNET_WORKERS", "2")
	}
	if _, err := DefaultTransport(); err != nil && !errors.Is(err, ErrUnsupported) {
		fmt.Fprintln(os.Stderr, "ucxnet tests: starting the default transport:", err)
		cleanup()
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent(), goleak.Cleanup(func(int) { cleanup() }))
}

// privateStatsDir points the stats sockets at a directory of the run's
// own unless UCXNET_STATS_DIR is set, and returns its removal.
func privateStatsDir() (cleanup func()) {
	if os.Getenv(EnvStatsDir) != "" {
		return func() {}
	}
	dir, err := os.MkdirTemp("", "ucxnet-stats-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "ucxnet tests:", err)
		os.Exit(1)
	}
	os.Setenv(EnvStatsDir, dir)
	return func() { os.RemoveAll(dir) }
}

// haveUCX reports whether this build runs UCX (cgo on Linux).
func haveUCX() bool { return UCX().Version != "" }

// needUCX skips t when this build runs no UCX.
func needUCX(t testing.TB) {
	t.Helper()
	if !haveUCX() {
		t.Skip("needs UCX, and this build has none (built without cgo or off Linux)")
	}
}

// pair is two transports sharing an in-process registry and a listener on
// the server.
type pair struct {
	server, client *Transport
	ln             net.Listener
	dialer         *Dialer
	// newT starts another transport of the pair's kind (the caller
	// closes it).
	newT func(Config) *Transport
}

// newPair starts a pair over UCX; in a build without UCX it skips t
// unless cfg forces the kernel-TCP lane.
func newPair(t testing.TB, cfg Config) *pair {
	t.Helper()
	if cfg.Lane != LaneTCP {
		needUCX(t)
	}
	return newPairOf(t, cfg, func(cfg Config) *Transport {
		tr, err := NewTransport(cfg)
		require.NoError(t, err)
		return tr
	})
}

// newPairOf is newPair with transports that newT starts.
func newPairOf(t testing.TB, cfg Config, newT func(Config) *Transport) *pair {
	t.Helper()
	if cfg.Registry == nil {
		cfg.Registry = registry.NewMemory()
	}
	s, c := newT(cfg), newT(cfg)
	lc := ListenConfig{Transport: s}
	ln, err := lc.Listen(t.Context(), Network, "")
	require.NoError(t, err)
	p := &pair{server: s, client: c, ln: ln, dialer: &Dialer{Transport: c, Timeout: 10 * time.Second}, newT: newT}
	t.Cleanup(func() {
		ln.Close()
		c.Close()
		s.Close()
	})
	return p
}

// newMemTransport starts a transport over the in-memory engine network n.
func newMemTransport(t testing.TB, n *memengine.Network, cfg Config) *Transport {
	t.Helper()
	tr, err := newTransportOn(cfg, func(_ session.Config, h engine.Handler) (engine.Engine, error) { return n.Start(h) })
	require.NoError(t, err)
	return tr
}

// forEachEngine runs f as two subtests over pairs with cfg, through the
// face: "mem", over the in-memory engine, which runs in every build, and
// "ucx", over UCX, which skips (saying why) in a build without it (unless
// cfg forces the kernel-TCP lane).
func forEachEngine(t *testing.T, cfg Config, f func(t *testing.T, p *pair)) {
	t.Run("mem", func(t *testing.T) {
		n := memengine.NewNetwork()
		mcfg := cfg
		if mcfg.StatsDir == "" {
			mcfg.StatsDir = StatsOff
		}
		if mcfg.Lane == LaneUCX {
			// The engine's own lane: a forced UCX lane would refuse the
			// in-memory engine's addresses.
			mcfg.Lane = ""
		}
		f(t, newPairOf(t, mcfg, func(cfg Config) *Transport { return newMemTransport(t, n, cfg) }))
	})
	t.Run("ucx", func(t *testing.T) { f(t, newPair(t, cfg)) })
}

// conns dials the pair's listener and returns both ends.
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

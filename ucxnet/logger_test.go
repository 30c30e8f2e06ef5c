package ucxnet

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pskListener listens on p's server with key, echoing what its conns
// read, until the test ends.
func pskListener(t testing.TB, p *pair, key []byte) net.Listener {
	t.Helper()
	lc := ListenConfig{Transport: p.server, PSK: key}
	ln, err := lc.Listen(context.Background(), Network, "")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	return ln
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Config.Logger records a refused handshake, on both lanes.
func TestLoggerRefusedHandshake(t *testing.T) {
	for _, lane := range []string{LaneUCX, LaneTCP} {
		t.Run(lane, func(t *testing.T) {
			var buf syncBuffer
			forEachEngine(t, Config{Lane: lane, Logger: slog.New(slog.NewTextHandler(&buf, nil))}, func(t *testing.T, p *pair) {
				ln := pskListener(t, p, bytes.Repeat([]byte("k"), MinPSKLen))
				_, err := p.dialer.Dial(Network, ln.Addr().String())
				require.Error(t, err, "a dialer without the key")
				require.Eventually(t, func() bool { return bytes.Contains([]byte(buf.String()), []byte("refused")) }, 10*time.Second, 5*time.Millisecond)
				require.Contains(t, buf.String(), "level=WARN")
				require.Contains(t, buf.String(), "transport="+p.server.Name())
			})
		})
	}
}

// snapshotHandler is a slog.Handler that takes a Snapshot of every
// transport for each record, as a handler adding stats to its records
// would.
type snapshotHandler struct{ records atomic.Int64 }

func (h *snapshotHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *snapshotHandler) Handle(context.Context, slog.Record) error {
	Snapshots()
	h.records.Add(1)
	return nil
}
func (h *snapshotHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *snapshotHandler) WithGroup(string) slog.Handler      { return h }

// Config.Logger's handler may call back into the transport: a failed
// authentication is logged with no conn's lock held. Before, the dialer's
// "listener did not authenticate" record was logged holding the dialing
// conn's lock, and a handler reading Conns deadlocked the engine.
func TestLoggerHandlerMayReadStats(t *testing.T) {
	h := &snapshotHandler{}
	forEachEngine(t, Config{Logger: slog.New(h)}, func(t *testing.T, p *pair) {
		open := pskListener(t, p, nil)
		d := Dialer{Transport: p.client, PSK: bytes.Repeat([]byte("k"), MinPSKLen), Timeout: 5 * time.Second}
		done := make(chan error, 1)
		go func() {
			_, err := d.Dial(Network, open.Addr().String())
			done <- err
		}()
		select {
		case err := <-done:
			require.ErrorIs(t, err, syscall.ECONNREFUSED)
			require.Contains(t, err.Error(), "did not authenticate")
		case <-time.After(60 * time.Second): // a hang guard
			t.Fatal("the dial hung: the engine is stuck in the log handler")
		}
		require.NotZero(t, h.records.Load(), "the failure was not logged")
	})
}

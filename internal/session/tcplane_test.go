package session

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/lane"
	"github.com/ucxnet/ucxnet/registry"
)

// newTCPLanePair is a pair whose conns take the kernel-TCP lane (forced:
// in-process both ends are on one host, where auto picks shared memory).
func newTCPLanePair(t testing.TB, cfg Config) *pair {
	cfg.Lane = LaneTCP
	return newPair(t, cfg)
}

// tcpEndpoint is the first TCP endpoint p's listener publishes.
func (p *pair) tcpEndpoint(t testing.TB) string {
	e, err := p.server.reg.Resolve(context.Background(), p.ln.Addr().String())
	require.NoError(t, err)
	eps := lane.ParseEndpoints(e.Meta[MetaTCP], true)
	require.NotEmpty(t, eps, "meta %v", e.Meta)
	return eps[0].String()
}

func TestTCPLaneEcho(t *testing.T) {
	p := newTCPLanePair(t, Config{})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	name, why := c.(*testConn).Lane()
	require.Equal(t, LaneTCP, name)
	require.Equal(t, lane.ReasonForcedConfig, why)
	name, why = s.(*testConn).Lane()
	require.Equal(t, LaneTCP, name)
	require.Equal(t, reasonAcceptedTCP, why)
	require.Equal(t, []string{"tcp(kernel)"}, c.(*testConn).Transports())
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	require.NoError(t, err)
	require.Equal(t, p.ln.Addr().String(), host)
	require.Equal(t, c.LocalAddr().String(), s.RemoteAddr().String())
	require.Equal(t, Network, c.LocalAddr().Network())
	go io.Copy(s, s)
	for _, n := range []int{1, 100, 100 << 10, 3 << 20} {
		msg := make([]byte, n)
		rand.Read(msg)
		go func() { c.Write(msg) }()
		got := make([]byte, n)
		_, err := io.ReadFull(c, got)
		require.NoError(t, err)
		require.True(t, bytes.Equal(msg, got), "size %d", n)
	}
	require.Equal(t, uint64(2), p.client.LaneStats().OpenConns+p.server.LaneStats().OpenConns)
}

// Closed reports whether Close was called, on either lane (a UCX stream
// checks it before it sets a deadline).
func TestConnClosed(t *testing.T) {
	for _, name := range []string{LaneTCP, LaneUCX} {
		t.Run(name, func(t *testing.T) {
			p := newPair(t, Config{Lane: name})
			c, s := p.conns(t)
			defer s.Close()
			sc := c.(*testConn)
			require.False(t, sc.Closed())
			require.NoError(t, c.Close())
			require.True(t, sc.Closed())
			require.ErrorIs(t, c.Close(), net.ErrClosed)
			require.True(t, sc.Closed())
		})
	}
}

// The key acceptance test: x/net/nettest's conformance suite over the
// kernel-TCP lane.
func TestTCPLaneNetTest(t *testing.T) {
	runNetTest(t, newTCPLanePair(t, Config{}))
}

// Errors keep the standard library's shapes, with ucxnet addresses.
func TestTCPLaneErrors(t *testing.T) {
	p := newTCPLanePair(t, Config{})
	c, s := p.conns(t)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	_, err := c.Read(make([]byte, 1))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	var op *net.OpError
	require.ErrorAs(t, err, &op)
	require.Equal(t, Network, op.Net)
	require.Equal(t, c.RemoteAddr(), op.Addr)
	require.NoError(t, c.SetReadDeadline(time.Time{}))

	require.NoError(t, s.(*testConn).CloseWrite())
	_, err = c.Read(make([]byte, 1))
	require.Equal(t, io.EOF, err)
	_, err = s.Write([]byte("x"))
	require.ErrorIs(t, err, syscall.EPIPE)

	c.Close()
	s.Close()

	// SetLinger(0): Close resets; the closed conn says net.ErrClosed.
	c, s = p.conns(t)
	require.NoError(t, s.(*testConn).SetLinger(0))
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Close(), net.ErrClosed)
	_, err = s.Read(make([]byte, 1))
	require.ErrorIs(t, err, net.ErrClosed)
	require.ErrorIs(t, s.SetDeadline(time.Now()), net.ErrClosed)
	_, err = io.Copy(io.Discard, c)
	require.ErrorIs(t, err, syscall.ECONNRESET)
	c.Close()

	// Transport.Close resets the TCP-lane conns it has.
	c, s = p.conns(t)
	defer c.Close()
	require.NoError(t, p.server.Close())
	_, err = c.Read(make([]byte, 1))
	require.ErrorIs(t, err, syscall.ECONNRESET)
	_, err = s.Write([]byte("x"))
	require.ErrorIs(t, err, net.ErrClosed)
}

// Dials to a name with no listener, to a closed listener and to a
// listener that refuses fail with ECONNREFUSED.
func TestTCPLaneRefused(t *testing.T) {
	p := newTCPLanePair(t, Config{Backlog: 1})
	_, err := p.dialer.Dial(Network, "nobody-listens-here")
	require.ErrorIs(t, err, syscall.ECONNREFUSED)

	// Backlog full.
	c1, err := p.dialer.Dial(Network, p.ln.Addr().String())
	require.NoError(t, err)
	defer c1.Close()
	_, err = p.dialer.Dial(Network, p.ln.Addr().String())
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.Contains(t, err.Error(), "backlog full")

	// A stale entry whose TCP endpoint is now another listener's: the
	// name in the preamble does not match.
	e, err := p.server.reg.Resolve(context.Background(), p.ln.Addr().String())
	require.NoError(t, err)
	e.Name = "stale-name"
	require.NoError(t, p.server.reg.Register(context.Background(), e))
	_, err = p.dialer.Dial(Network, "stale-name")
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.Contains(t, err.Error(), "no listener of that name")

	// Closed listener: its TCP port is closed too.
	ep := p.tcpEndpoint(t)
	require.NoError(t, p.ln.Close())
	_, err = net.Dial("tcp", ep)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	_, err = p.dialer.Dial(Network, "stale-name")
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
}

// The PSK proof runs on the TCP lane before any data: same key works;
// wrong key, missing key on either side is refused.
func TestTCPLanePSK(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	reg := registry.NewMemory()
	s, err := newUCXTransport(Config{Registry: reg, Lane: LaneTCP})
	require.NoError(t, err)
	defer s.Close()
	c, err := newUCXTransport(Config{Registry: reg, Lane: LaneTCP})
	require.NoError(t, err)
	defer c.Close()
	lc := ListenConfig{Transport: s, PSK: key}
	ln, err := lc.Listen(context.Background(), "")
	require.NoError(t, err)
	defer ln.Close()
	plain := ListenConfig{Transport: s}
	ln2, err := plain.Listen(context.Background(), "")
	require.NoError(t, err)
	defer ln2.Close()
	go func() {
		for {
			a, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(a, a); a.Close() }()
		}
	}()
	d := &Dialer{Transport: c, PSK: key, Timeout: 10 * time.Second}
	conn, err := d.Dial(Network, ln.Addr().String())
	require.NoError(t, err)
	_, err = conn.Write([]byte("hello"))
	require.NoError(t, err)
	got := make([]byte, 5)
	_, err = io.ReadFull(conn, got)
	require.NoError(t, err)
	require.Equal(t, "hello", string(got))
	conn.Close()

	authFailures := s.Stats().AuthFailures
	for _, tc := range []struct {
		d    *Dialer
		name string
		want string
	}{
		{&Dialer{Transport: c, PSK: []byte("wrong-key-wrong-key-wrong-key!!!")}, ln.Addr().String(), "refused the key proof: pre-shared key mismatch"},
		{&Dialer{Transport: c}, ln.Addr().String(), "or it requires a pre-shared key"},
		{&Dialer{Transport: c, PSK: key}, ln2.Addr().String(), "it has no pre-shared key"},
	} {
		_, err := tc.d.Dial(Network, tc.name)
		require.ErrorIs(t, err, syscall.ECONNREFUSED)
		require.Contains(t, err.Error(), tc.want)
	}
	require.Equal(t, authFailures+3, s.Stats().AuthFailures)
}

// io.Copy between a TCP-lane conn and a file goes through the conn's
// ReadFrom and WriteTo ((*net.TCPConn)'s: sendfile and splice), and on
// the UCX lane they still copy without recursing.
func TestTCPLaneCopyFastPath(t *testing.T) {
	data := make([]byte, 4<<20)
	rand.Read(data)
	path := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	for _, cfg := range []Config{{Lane: LaneTCP}, {Lane: LaneUCX}} {
		t.Run(cfg.Lane, func(t *testing.T) {
			if cfg.Lane == LaneUCX && !haveUCXBuild() {
				t.Skip("a build without UCX")
			}
			p := newPair(t, cfg)
			c, s := p.conns(t)
			defer s.Close()
			name, _ := c.(*testConn).Lane()
			require.Equal(t, cfg.Lane, name)
			f, err := os.Open(path)
			require.NoError(t, err)
			defer f.Close()
			done := make(chan error, 1)
			go func() {
				_, err := io.Copy(c, f) // sendfile on the TCP lane
				if err == nil {
					err = c.Close()
				}
				done <- err
			}()
			out, err := os.Create(filepath.Join(t.TempDir(), "g"))
			require.NoError(t, err)
			defer out.Close()
			n, err := io.Copy(out, s) // splice on the TCP lane
			require.NoError(t, err)
			require.Equal(t, int64(len(data)), n)
			require.NoError(t, <-done)
			got, err := os.ReadFile(out.Name())
			require.NoError(t, err)
			require.True(t, bytes.Equal(data, got))
		})
	}
}

// rawTCP connects to p's TCP endpoint directly, as an attacker would.
func rawTCP(t *testing.T, p *pair) net.Conn {
	nc, err := net.Dial("tcp", p.tcpEndpoint(t))
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	return nc
}

// waitClosed waits (30 s at most: longer is a hang) for nc's peer to close.
func waitClosed(t *testing.T, nc net.Conn) {
	t.Helper()
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(30*time.Second)))
	_, err := io.Copy(io.Discard, nc)
	require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the listener kept the conn: %v", err)
}

// requireListenerServes checks that p's listener still accepts a proper
// dial.
func requireListenerServes(t *testing.T, p *pair) {
	t.Helper()
	c, s := p.conns(t)
	c.Close()
	s.Close()
}

// Garbage bytes from a port scanner (or an HTTP client) on the TCP port:
// the conn is closed and counted, nothing else is affected.
func TestTCPLaneAttackGarbage(t *testing.T) {
	p := newTCPLanePair(t, Config{})
	for _, junk := range [][]byte{
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		bytes.Repeat([]byte{0xff}, 4096),
		[]byte("UCXNTCP\x02 a newer version"),
	} {
		nc := rawTCP(t, p)
		_, _ = nc.Write(junk)
		waitClosed(t, nc)
	}
	require.Equal(t, uint64(3), p.server.LaneStats().Garbage)
	requireListenerServes(t, p)
}

// A preamble whose fields are out of bounds (a name of 60,000 bytes) is
// refused from its fixed part: nothing more is read or allocated.
func TestTCPLaneAttackOversizedPreamble(t *testing.T) {
	p := newTCPLanePair(t, Config{})
	for _, lens := range [][2]uint16{{60000, 0}, {10, 300}, {0, 0}} {
		nc := rawTCP(t, p)
		b := []byte(lane.Magic)
		b = append(b, 0, 0)
		b = binary.LittleEndian.AppendUint64(b, 1)
		b = binary.LittleEndian.AppendUint16(b, lens[0])
		b = binary.LittleEndian.AppendUint16(b, lens[1])
		_, _ = nc.Write(b)
		waitClosed(t, nc)
	}
	require.Equal(t, uint64(3), p.server.LaneStats().Oversized)
	requireListenerServes(t, p)
}

// A slowloris preamble (a byte now and then, never finished) is cut at
// the handshake timeout.
func TestTCPLaneAttackSlowloris(t *testing.T) {
	defer func(d time.Duration) { tcpHandshakeTimeout = d }(tcpHandshakeTimeout)
	tcpHandshakeTimeout = 300 * time.Millisecond
	p := newTCPLanePair(t, Config{})
	nc := rawTCP(t, p)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; i < len(lane.Magic); i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := nc.Write([]byte{lane.Magic[i]}); err != nil {
				return
			}
		}
	}()
	waitClosed(t, nc)
	require.Equal(t, uint64(1), p.server.LaneStats().Timeouts)
	requireListenerServes(t, p)
}

// haveUCXBuild reports whether this build runs UCX.
func haveUCXBuild() bool {
	dt, err := DefaultTransport()
	return err == nil && dt.policy.haveUCX()
}

// A listener whose application meta leaves no room for MetaTCP still
// listens (UCX only, as before the lane existed), and publishes no TCP
// endpoint; an application's own "tcp" key is replaced.
func TestTCPLaneMetaFull(t *testing.T) {
	if !haveUCXBuild() {
		t.Skip("a build without UCX has no other lane")
	}
	tr, err := newUCXTransport(Config{Registry: registry.NewMemory(), Lane: LaneAuto})
	require.NoError(t, err)
	defer tr.Close()
	big := map[string]string{"big": strings.Repeat("x", registry.MaxMetaBytes-20)}
	lc := ListenConfig{Transport: tr, Meta: big}
	ln, err := lc.Listen(t.Context(), "")
	require.NoError(t, err)
	defer ln.Close()
	require.Nil(t, ln.tcp)
	e, err := tr.reg.Resolve(t.Context(), ln.Addr().String())
	require.NoError(t, err)
	require.NotContains(t, e.Meta, MetaTCP)

	lc = ListenConfig{Transport: tr, Meta: map[string]string{MetaTCP: "10.9.9.9:1"}}
	ln2, err := lc.Listen(t.Context(), "")
	require.NoError(t, err)
	defer ln2.Close()
	e, err = tr.reg.Resolve(t.Context(), ln2.Addr().String())
	require.NoError(t, err)
	if ln2.tcp != nil {
		require.NotEqual(t, "10.9.9.9:1", e.Meta[MetaTCP])
	}
}

// A dialing transport whose name has spaces and non-ASCII bytes still
// dials: its local name goes out as printable ASCII.
func TestTCPLaneOddLocalName(t *testing.T) {
	p := newTCPLanePair(t, Config{Name: "my app é\tx"})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	require.True(t, lane.Printable(s.RemoteAddr().String()), "%q", s.RemoteAddr())
}

// A reader that stops reading for longer than the TCP lane's user
// timeout (its peer's window stays shut, the peer alive) does not fail
// the conn: only an unanswering peer does.
func TestTCPLaneStalledReaderKept(t *testing.T) {
	p := newTCPLanePair(t, Config{KeepAlive: 500 * time.Millisecond}) // user timeout 2 s
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	const total = 64 << 20 // far beyond the socket buffers
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(make([]byte, total))
		werr <- err
	}()
	time.Sleep(4 * time.Second) // the writer waits on a shut window meanwhile
	n, err := io.CopyN(io.Discard, s, total)
	require.NoError(t, err)
	require.Equal(t, int64(total), n)
	require.NoError(t, <-werr)
}

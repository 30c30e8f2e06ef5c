package ucxnet

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// With two workers a side, a dial accepted on the listener's first worker
// gets its ACCEPT through the endpoint its CONNECT went to, while the
// dialer's peer for that worker holds only the dial itself and the From
// of an endpoint the listener's idle sweep closed since. The ACCEPT must
// bind the dial: a dial waiting for its answer is no claim on the peer.
// Before, the dial counted as a conn of the peer, and the dial failed
// with ErrProtocol "bad ACCEPT: worker address refused".
func TestMemAcceptOnFirstWorkerAfterIdleClose(t *testing.T) {
	p := newMemPair(t, Config{Workers: 2, Window: 256 << 10})
	dial := func() (*Conn, *Conn) {
		p.client.nextDial.Store(0)   // client worker 1
		p.server.nextAccept.Store(1) // server worker 0, where CONNECTs arrive
		acc := make(chan net.Conn, 1)
		go func() { s, _ := p.ln.Accept(); acc <- s }()
		c, err := p.dialer.Dial(Network, p.ln.Addr().String())
		require.NoError(t, err)
		s := (<-acc).(*Conn)
		require.Equal(t, 0, s.sh.idx)
		go func() { _, _ = echoAll(s) }()
		return c.(*Conn), s
	}
	c1, s1 := dial()
	echoes(t, c1, "first")
	require.NoError(t, c1.Close())
	require.NoError(t, s1.Close())
	waitNoConns(t, p.client)
	waitNoConns(t, p.server)
	p.server.closePeer(s1.peer, false) // as its idle sweep does
	c2, s2 := dial()
	defer c2.Close()
	defer s2.Close()
	echoes(t, c2, "after the listener's sweep")
}

// echoAll echoes s until it ends.
func echoAll(s net.Conn) (int64, error) {
	b := make([]byte, 4096)
	var n int64
	for {
		k, err := s.Read(b)
		if k > 0 {
			if _, werr := s.Write(b[:k]); werr != nil {
				return n, werr
			}
			n += int64(k)
		}
		if err != nil {
			return n, err
		}
	}
}

// A dial that refuses its ACCEPT (here: it names a worker whose peer
// holds a bound conn that, as the dialer sees it, comes from another
// endpoint) answers it with an RST, and the conn the listener queued is
// reset. Before, the dialer sent nothing, and the application accepted a
// conn that was reset only after twice its KeepAlive.
func TestMemRefusedAcceptReset(t *testing.T) {
	p := newMemPair(t, Config{Workers: 2, Window: 256 << 10})
	c1, _ := dialPinned(t, p.pair) // client worker 1, server worker 1
	p.client.mu.Lock()
	cp := c1.peer
	require.NotZero(t, cp.from)
	cp.from++ // the peer's frames now seem to come from elsewhere
	p.client.mu.Unlock()
	p.client.nextDial.Store(0)
	p.server.nextAccept.Store(0) // server worker 1, the claimed one
	rst := p.client.Stats().ResetsSent
	acc := make(chan net.Conn, 1)
	go func() { s, _ := p.ln.Accept(); acc <- s }()
	_, err := p.dialer.Dial(Network, p.ln.Addr().String())
	require.ErrorIs(t, err, ErrProtocol)
	require.ErrorContains(t, err, "worker address refused")
	require.Greater(t, p.client.Stats().ResetsSent, rst)
	zc := <-acc
	require.NotNil(t, zc)
	defer zc.Close()
	require.NoError(t, zc.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = zc.Read(make([]byte, 1))
	require.ErrorIs(t, err, syscall.ECONNRESET, "the refused conn was not reset")
}

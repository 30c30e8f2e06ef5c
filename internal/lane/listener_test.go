package lane

import (
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// heldListener is a loopback Listener whose serve holds each conn in its
// preamble until release is closed, marking it this side's turn when
// busy reports true for it (by arrival, from 0).
type heldListener struct {
	*Listener
	release chan struct{}
	overCap atomic.Int32
	served  atomic.Int32
	mu      sync.Mutex
	order   []*net.TCPConn // the conns served, in arrival order
}

func newHeldListener(t *testing.T, busy func(i int) bool) *heldListener {
	hl := &heldListener{release: make(chan struct{})}
	tl, err := Listen("lo", func(tl *Listener, tc *net.TCPConn) {
		hl.mu.Lock()
		i := len(hl.order)
		hl.order = append(hl.order, tc)
		hl.mu.Unlock()
		if busy(i) {
			tl.PeerTurn(tc, false)
		}
		hl.served.Add(1)
		<-hl.release
		tl.Done(tc)
	}, func() { hl.overCap.Add(1) })
	if err != nil || tl == nil {
		t.Skipf("no loopback interface to listen on (%v)", err)
	}
	hl.Listener = tl
	t.Cleanup(func() {
		select {
		case <-hl.release:
		default:
			close(hl.release)
		}
		tl.Close()
	})
	return hl
}

// dial connects to hl, sends b and returns the conn once hl serves it.
func (hl *heldListener) dial(t *testing.T, b []byte) net.Conn {
	t.Helper()
	before := hl.served.Load()
	nc, err := net.Dial("tcp", hl.Endpoints()[0].String())
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	if len(b) > 0 {
		_, err = nc.Write(b)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return hl.served.Load() > before }, 30*time.Second, time.Millisecond)
	return nc
}

// cut reports whether the listener reset or closed nc (30 s at most:
// longer is a hang).
func cut(t *testing.T, nc net.Conn) bool {
	t.Helper()
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(30*time.Second)))
	_, err := io.Copy(io.Discard, nc)
	return !isTimeout(err)
}

// open reports whether nc is still open (nothing comes within 50 ms: a
// wrong answer here fails the test the other way, never by chance).
func open(nc net.Conn) bool {
	_ = nc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := nc.Read(make([]byte, 1))
	return isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// One source holds at most MaxPendingPerSource conns in their preamble:
// the one beyond takes the place of the oldest idle one (silent, its
// peer's turn), counted. A conn whose bytes wait unread, or that is this
// side's turn, is not idle; with none idle the newcomer is reset. Close
// closes the held ones and waits for their serve calls.
func TestListenerPendingEvictsOldestIdle(t *testing.T) {
	// Conn 0 is busy (this side's turn); conn 1 sent bytes that no one
	// reads; the rest are silent.
	hl := newHeldListener(t, func(i int) bool { return i == 0 })
	var conns []net.Conn
	conns = append(conns, hl.dial(t, nil), hl.dial(t, []byte("x")))
	for len(conns) < MaxPendingPerSource {
		conns = append(conns, hl.dial(t, nil))
	}
	require.Equal(t, MaxPendingPerSource, hl.Pending())
	require.Zero(t, hl.overCap.Load())

	extra := hl.dial(t, nil)
	require.True(t, cut(t, conns[2]), "the oldest idle conn makes room")
	require.Equal(t, int32(1), hl.overCap.Load())
	require.True(t, open(conns[0]), "a busy conn stays")
	require.True(t, open(conns[1]), "a conn with bytes unread stays")
	require.True(t, open(extra))
	require.Equal(t, MaxPendingPerSource, hl.Pending())
	hl.mu.Lock()
	require.True(t, hl.Evicted(hl.order[2]))
	require.False(t, hl.Evicted(hl.order[3]))
	hl.mu.Unlock()

	close(hl.release)
	hl.Close()
	require.Equal(t, int32(MaxPendingPerSource+1), hl.served.Load())
	require.Equal(t, 0, hl.Pending())
	require.False(t, hl.Reserve(func(int) bool { return false }), "a closed listener reserves nothing")
}

// When no conn of the source is idle, the newcomer is reset at once.
func TestListenerPendingNoneIdle(t *testing.T) {
	hl := newHeldListener(t, func(int) bool { return true })
	for range MaxPendingPerSource {
		hl.dial(t, nil)
	}
	nc, err := net.Dial("tcp", hl.Endpoints()[0].String())
	if err == nil { // so soon reset that the dial itself may see the RST
		defer nc.Close()
		require.True(t, cut(t, nc))
	}
	require.Eventually(t, func() bool { return hl.overCap.Load() == 1 }, 30*time.Second, time.Millisecond)
	require.Equal(t, MaxPendingPerSource, hl.Pending())
	require.True(t, hl.Reserve(func(int) bool { return false }))
	require.False(t, hl.Reserve(func(reserved int) bool { return reserved >= 1 }))
	hl.Unreserve()
}

// A source is an IPv4 address or an IPv6 /64.
func TestSource(t *testing.T) {
	require.Equal(t, "10.1.2.3/32", Source(netip.MustParseAddr("10.1.2.3")).String())
	require.Equal(t, "10.1.2.3/32", Source(netip.MustParseAddr("::ffff:10.1.2.3")).String())
	require.Equal(t, "2001:db8:1:2::/64", Source(netip.MustParseAddr("2001:db8:1:2:3:4:5:6")).String())
}

// When all MaxPending places are taken, a newcomer evicts the oldest idle
// conn of the source holding the most, not the oldest of all: a source
// that floods cannot push out another's conns.
func TestListenerPendingBusiestSourcePays(t *testing.T) {
	hl := newHeldListener(t, func(int) bool { return false })
	from := func(ip string) net.Conn {
		t.Helper()
		before := hl.served.Load()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		nc, err := d.Dial("tcp", hl.Endpoints()[0].String())
		require.NoError(t, err)
		t.Cleanup(func() { nc.Close() })
		require.Eventually(t, func() bool { return hl.served.Load() > before }, 30*time.Second, time.Millisecond)
		return nc
	}
	if !hl.Endpoints()[0].Addr().Is4() {
		t.Skip("no IPv4 loopback endpoint to dial from several sources")
	}
	var b []net.Conn
	for range MaxPendingPerSource - 1 {
		b = append(b, from("127.0.0.2")) // the oldest conns
	}
	var a []net.Conn
	for range MaxPendingPerSource {
		a = append(a, from("127.0.0.1"))
	}
	from("127.0.0.3")
	require.Equal(t, MaxPending, hl.Pending())
	from("127.0.0.3")
	require.True(t, cut(t, a[0]), "the busiest source's oldest idle conn makes room")
	for _, nc := range b {
		require.True(t, open(nc), "another source's conns stay")
	}
	require.Equal(t, int32(1), hl.overCap.Load())
}

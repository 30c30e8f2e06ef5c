package lane

import (
	"io"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// heldListener is a loopback Listener whose serve reads one byte of each
// conn (the kernel holds a conn that sent nothing: DeferAccept), or its
// hello and then calls PeerTurn(tc, turn(i) == "peer") where turn(i) is
// not "" (by arrival, from 0), and holds it in its preamble until release
// is closed.
type heldListener struct {
	*Listener
	release chan struct{}
	overCap atomic.Int32
	served  atomic.Int32
	mu      sync.Mutex
	order   []*net.TCPConn // the conns served, in arrival order
}

func newHeldListener(t *testing.T, turn func(i int) string) *heldListener {
	hl := &heldListener{release: make(chan struct{})}
	tl, err := Listen("lo", func(tl *Listener, tc *net.TCPConn) {
		hl.mu.Lock()
		i := len(hl.order)
		hl.order = append(hl.order, tc)
		hl.mu.Unlock()
		if turn(i) != "" {
			_, _ = ReadHello(tc)
			tl.PeerTurn(tc, turn(i) == "peer")
		} else {
			_, _ = tc.Read(make([]byte, 1))
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

// dial connects to hl, sends b (at least a byte) and returns the conn once
// hl serves it.
func (hl *heldListener) dial(t *testing.T, b []byte) net.Conn {
	t.Helper()
	before := hl.served.Load()
	nc, err := net.Dial("tcp", hl.Endpoints()[0].String())
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	_, err = nc.Write(b)
	require.NoError(t, err)
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
// the one beyond takes the place of one of them, counted: first the
// oldest whose hello had not come when accepted (and is still not read),
// then the oldest waiting for its key proof with nothing unread, then
// the oldest of all. Close closes the held ones and waits for their serve
// calls.
func TestListenerPendingEvictionOrder(t *testing.T) {
	const n = MaxPendingPerSource
	// Conns 0 to 3: busy (this side's turn); 4 to 7: waiting for a key
	// proof; 8: waiting for a proof that came (unread); the rest: their
	// hello never all came.
	hl := newHeldListener(t, func(i int) string {
		switch {
		case i < 4:
			return "us"
		case i < 9:
			return "peer"
		}
		return ""
	})
	hello := AppendHello(nil, Hello{ID: 1, Name: "x"})
	var conns []net.Conn
	for i := range n {
		b := []byte("x")
		if i < 9 {
			b = hello // all came: read later
		}
		conns = append(conns, hl.dial(t, b))
		if i == 8 {
			_, err := conns[8].Write([]byte("proof"))
			require.NoError(t, err)
		}
	}
	require.Equal(t, n, hl.Pending())
	require.Zero(t, hl.overCap.Load())
	for want := range []int{9, 10} {
		hl.dial(t, hello)
		require.True(t, cut(t, conns[9+want]), "a conn whose hello never came goes first, the oldest first")
	}
	for i := 11; i < n; i++ {
		hl.dial(t, hello)
	}
	require.Equal(t, int32(n-9), hl.overCap.Load())
	for _, i := range []int{4, 5, 6, 7, 0, 1, 2, 3, 8} {
		require.True(t, open(conns[i]), "conn %d", i)
		hl.dial(t, hello)
		require.True(t, cut(t, conns[i]), "conn %d: the unproven ones go next, then the rest, the oldest first", i)
	}
	require.Equal(t, n, hl.Pending())
	hl.mu.Lock()
	require.True(t, hl.Evicted(hl.order[9]))
	require.False(t, hl.Evicted(hl.order[n+1]))
	hl.mu.Unlock()

	close(hl.release)
	hl.Close()
	require.Equal(t, int32(2*n), hl.served.Load())
	require.Equal(t, 0, hl.Pending())
	require.False(t, hl.Reserve(func(int) bool { return false }), "a closed listener reserves nothing")
	require.True(t, func() bool { hl.mu.Lock(); defer hl.mu.Unlock(); return len(hl.order) == 2*n }())
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
	hl := newHeldListener(t, func(int) string { return "" })
	from := func(ip string) net.Conn {
		t.Helper()
		before := hl.served.Load()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		nc, err := d.Dial("tcp", hl.Endpoints()[0].String())
		require.NoError(t, err)
		t.Cleanup(func() { nc.Close() })
		_, err = nc.Write([]byte("x"))
		require.NoError(t, err)
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

// A conn that sends nothing is held by the kernel (Linux): it takes no
// preamble place; one that sends a byte is served at once.
func TestListenerDefersSilentConns(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("TCP_DEFER_ACCEPT is Linux's")
	}
	hl := newHeldListener(t, func(int) string { return "" })
	silent, err := net.Dial("tcp", hl.Endpoints()[0].String())
	require.NoError(t, err)
	defer silent.Close()
	nc := hl.dial(t, []byte("x"))
	hl.mu.Lock()
	defer hl.mu.Unlock()
	require.Equal(t, nc.LocalAddr().String(), hl.order[0].RemoteAddr().String(), "the silent conn was served first")
	require.Equal(t, 1, hl.Pending())
}

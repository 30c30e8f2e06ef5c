package lane

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A listener holds at most MaxPending conns in their preamble: the one
// beyond is reset and counted; Close closes the held ones and waits for
// their serve calls.
func TestListenerPendingCap(t *testing.T) {
	release := make(chan struct{})
	var overCap atomic.Int32
	var served atomic.Int32
	tl, err := Listen("lo", func(tl *Listener, tc *net.TCPConn) {
		served.Add(1)
		<-release
		tl.Done(tc)
	}, func() { overCap.Add(1) })
	if err != nil || tl == nil {
		t.Skipf("no loopback interface to listen on (%v)", err)
	}
	ep := tl.Endpoints()[0].String()
	var held []net.Conn
	defer func() {
		for _, nc := range held {
			nc.Close()
		}
	}()
	for range MaxPending {
		nc, err := net.Dial("tcp", ep)
		require.NoError(t, err)
		held = append(held, nc)
	}
	require.Eventually(t, func() bool { return tl.Pending() == MaxPending }, 30*time.Second, 10*time.Millisecond)
	extra, err := net.Dial("tcp", ep)
	if err == nil {
		defer extra.Close()
	}
	require.Eventually(t, func() bool { return overCap.Load() == 1 }, 30*time.Second, 10*time.Millisecond)
	require.True(t, tl.Reserve(func(int) bool { return false }))
	require.False(t, tl.Reserve(func(reserved int) bool { return reserved >= 1 }))
	tl.Unreserve()
	close(release)
	tl.Close()
	require.Equal(t, int32(MaxPending), served.Load())
	require.Equal(t, 0, tl.Pending())
	require.False(t, tl.Reserve(func(int) bool { return false }), "a closed listener reserves nothing")
}

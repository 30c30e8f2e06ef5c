package session

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Unproven streams are bounded per peer and in all: at its bound a peer's
// newcomer is not taken, and at the bound of all the busiest peer pays:
// one peer's flood costs its own, not another's.
func TestUnproven(t *testing.T) {
	var u Unproven[int, string]
	for i := range 3 {
		_, evicted := u.Add(i, "a", 3, 5)
		require.False(t, evicted)
	}
	evict, evicted := u.Add(3, "a", 3, 5)
	require.True(t, evicted)
	require.Equal(t, 3, evict, "at a's bound, a's newcomer is not taken")
	_, evicted = u.Add(10, "b", 3, 5)
	require.False(t, evicted)
	_, evicted = u.Add(11, "b", 3, 5)
	require.False(t, evicted)
	require.Equal(t, 5, u.Len())
	evict, evicted = u.Add(20, "c", 3, 5)
	require.True(t, evicted)
	require.Equal(t, 0, evict, "the busiest peer's oldest, at the bound in all")
	u.Remove(2)
	u.Remove(99) // not there: nothing
	require.Equal(t, 4, u.Len())
	_, evicted = u.Add(4, "a", 3, 5)
	require.False(t, evicted, "a has 1 left (1), b 2, c 1: room for 1")
	require.Equal(t, 5, u.Len())
}

// When all places are taken, the peer holding the most pays, not the
// oldest entry: an honest dialer's one handshake outlives a flood of
// unproven ones from many workers.
func TestUnprovenFairEviction(t *testing.T) {
	var u Unproven[int, string]
	u.Add(0, "honest", 8, 9)
	for i := 1; i < 9; i++ {
		u.Add(i, fmt.Sprintf("flooder-%d", i%4), 8, 9)
	}
	for i := 9; i < 100; i++ {
		evict, evicted := u.Add(i, fmt.Sprintf("flooder-%d", i%4), 8, 9)
		require.True(t, evicted)
		require.NotZero(t, evict, "the honest dialer's handshake was evicted")
	}
	require.Equal(t, 9, u.Len())
}

// The budget for unproven handshakes: a share per sending endpoint, one
// for all, and a share of its own for an endpoint that proved.
func TestHandshakeBudget(t *testing.T) {
	var h handshakeBudget
	now := time.Now()
	n := 0
	for range 100 {
		if ok, _ := h.allow(1, now); ok {
			n++
		}
	}
	require.Equal(t, senderBurst, n, "one endpoint's share")
	ok, _ := h.allow(1, now.Add(time.Second/senderRate))
	require.True(t, ok, "refilled at senderRate")
	h = handshakeBudget{}
	n = 0
	for from := uintptr(100); from < 1100; from++ {
		if ok, _ := h.allow(from, now); ok {
			n++
		}
	}
	require.Equal(t, unprovenBurst, n, "the share of all endpoints that never proved")
	ok, _ = h.allow(2000, now)
	require.False(t, ok, "the shared budget is spent")
	h.proved(3)
	n = 0
	for range 100 {
		if ok, _ := h.allow(3, now); ok {
			n++
		}
	}
	require.Equal(t, provenBurst, n, "a proven endpoint dials from its own share while the shared one is spent")
	for from := uintptr(10000); from < 10000+2*maxHandshakeSenders; from++ {
		h.allow(from, now)
	}
	require.LessOrEqual(t, len(h.senders), maxHandshakeSenders)
	require.True(t, h.senders[3] != nil && h.senders[3].proven, "proven endpoints are kept while most are not")
	h = handshakeBudget{}
	flood := 0
	for range senderBurst + overBurst + 10 {
		if _, f := h.allow(4, now); f {
			flood++
		}
	}
	require.Equal(t, 10, flood, "a sender past its budget and overBurst more is flooding")
}

// A pool opening many keyed conns at once through one fresh endpoint is
// not a flood: the CONNECTs over its share get no answer and are sent
// again (as are those beyond the eight a dialing worker may have waiting
// for their proofs), and the endpoint is never failed. (Dials that all
// resend at the same moments can still go unanswered for the 3 s a dial
// waits: logged, not asserted.)
func TestMemKeyedPoolNotFlood(t *testing.T) {
	p := newMemPair(t, Config{Workers: 2})
	key := []byte("correct horse battery staple")
	ln := pskListener(t, p.pair, key)
	d := Dialer{Transport: p.client, PSK: key, Timeout: 20 * time.Second}
	const n = 100
	errs := make(chan error, n)
	for range n {
		go func() {
			c, err := d.Dial(Network, ln.Addr().String())
			if err == nil {
				c.Close()
			}
			errs <- err
		}()
	}
	failed := 0
	for range n {
		if err := <-errs; err != nil {
			if failed == 0 {
				t.Logf("first failure: %v", err)
			}
			failed++
		}
	}
	st := p.server.Stats()
	t.Logf("%d concurrent keyed dials from one endpoint: %d failed; CONNECTs dropped %d", n, failed, st.ConnectsDropped)
	require.Zero(t, st.PeersFlooded, "an honest pool was taken for a flood")
	require.NotZero(t, st.ConnectsDropped, "the pool did not exceed a fresh endpoint's share")
}

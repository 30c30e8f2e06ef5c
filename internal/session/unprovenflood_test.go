package session

// CONNECT floods from real workers in a process of their own, as fast as
// they can, while honest dialers dial, half from a transport that dialed
// before, half fresh: CONNECTs that never prove the key to a keyed
// listener, and CONNECTs naming forged worker addresses to an open one.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAttackUnprovenHandshakeFlood(t *testing.T) {
	connectFloodDials(t, []byte("correct horse battery staple"))
}

func TestAttackForgedConnectFloodDials(t *testing.T) {
	connectFloodDials(t, nil)
}

// connectFloodDials floods a listener (keyed with key, if any) with
// CONNECTs from 16 raw workers in a process of their own: unproven ones,
// or without a key ones that name forged worker addresses; it counts
// honest dials and times an honest conn's round trips.
func connectFloodDials(t *testing.T, key []byte) {
	p := newPair(t, Config{})
	var name string
	mode := floodForged
	if key != nil {
		name = pskListener(t, p, key).Addr().String()
		mode = floodUnproven
	} else {
		acceptAll(t, p.ln)
		name = p.ln.Addr().String()
	}
	honest := echoConn(t, p)
	quiet := roundTrips(t, honest, 200)
	startFlood(t, p, mode, name)
	// The flood under way: honest dials begin once every flooder has been
	// cut off (each is failed after a few hundred CONNECTs past its
	// budget), while they all keep trying. Before that, a dial may wait
	// behind the backlog of CONNECTs the flooders queued.
	start := time.Now()
	during, n := roundTripsWhile(t, honest, func() bool {
		return p.server.Stats().PeersFlooded < floodWorkers && time.Since(start) < 20*time.Second
	})
	require.GreaterOrEqual(t, p.server.Stats().PeersFlooded, uint64(floodWorkers), "flooders not failed within 20 s")
	t.Logf("%d flooders cut off %v into the flood; an honest conn's round trip p50 meanwhile %v (%.1fx quiet %v, %d round trips)",
		floodWorkers, time.Since(start).Round(time.Millisecond), during, float64(during)/float64(quiet), quiet, n)

	known := Dialer{Transport: p.client, PSK: key, Timeout: 5 * time.Second}
	ok := 0
	for i := range 10 {
		d := known
		if i%2 == 1 {
			fresh, err := newUCXTransport(Config{Registry: p.server.cfg.Registry})
			require.NoError(t, err)
			defer fresh.Close()
			d.Transport = fresh
		}
		c, err := d.Dial(Network, name)
		if err != nil {
			t.Logf("honest dial %d (fresh %v): %v", i, i%2 == 1, err)
			continue
		}
		ok++
		c.Close()
	}
	after := roundTrips(t, honest, 200)
	st := p.server.Stats()
	t.Logf("an honest conn's round trip p50 with the cut-off flooders still sending %v (%.1fx quiet); honest dials %d/10 (keyed %v); CONNECTs dropped before any key exchange %d, auth failures %d, peers flooded %d",
		after, float64(after)/float64(quiet), ok, key != nil, st.ConnectsDropped, st.AuthFailures, st.PeersFlooded)
	require.GreaterOrEqual(t, ok, 9, "honest dials during the flood")
}

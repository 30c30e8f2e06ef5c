package session

// CONNECT floods from real workers, as fast as they can, while honest
// dialers dial, half from a transport that dialed before, half fresh:
// CONNECTs that never prove the key to a keyed listener, and CONNECTs
// naming forged worker addresses to an open one.

import (
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/stream"
)

func TestAttackUnprovenHandshakeFlood(t *testing.T) {
	connectFloodDials(t, []byte("correct horse battery staple"))
}

func TestAttackForgedConnectFloodDials(t *testing.T) {
	connectFloodDials(t, nil)
}

// connectFloodDials floods a listener (keyed with key, if any) with
// CONNECTs from 16 raw workers: unproven ones, or without a key ones that
// name forged worker addresses, and counts honest dials.
func connectFloodDials(t *testing.T, key []byte) {
	if os.Getenv("UCX_TLS") == "sm" {
		t.Skip("over shared memory a flooder is a process of this user, whose writes into this worker's FIFO no endpoint close stops: the tcp pass runs the attack")
	}
	p := newPair(t, Config{})
	var name string
	if key != nil {
		name = pskListener(t, p, key).Addr().String()
	} else {
		acceptAll(t, p.ln)
		name = p.ln.Addr().String()
	}
	honest := echoConn(t, p)
	quiet := roundTrips(t, honest, 200)
	const workers = 16
	raws := make([]*rawPeer, workers)
	for i := range raws {
		raws[i] = newRawPeer(t, p.server)
	}
	var stop atomic.Bool
	var sent atomic.Int64
	var wg sync.WaitGroup
	for i, r := range raws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := uint64(0); !stop.Load(); n++ {
				hello := stream.Hello{ConnID: uint64(i)<<32 | n + 1, EagerMax: 1 << 20, Window: 1 << 20, Name: name,
					WorkerAddr: r.eng.Address(), Nonce: randomChallenge()}
				if key == nil {
					hello.WorkerAddr, hello.Nonce = forgedAddress(t, r.eng.Address()), nil
				}
				b, _ := hello.MarshalBinary()
				h := stream.Header{Kind: stream.KindConnect, Length: uint32(len(b))}.Bytes()
				if r.sendErr(h[:], b) != nil {
					return
				}
				sent.Add(1)
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()
	// The flood under way: honest dials begin once every flooder has been
	// cut off (each is failed after a few hundred CONNECTs past its
	// budget), while they all keep trying. Before that, a dial may wait
	// behind the backlog of CONNECTs the flooders queued.
	start := time.Now()
	during, n := roundTripsWhile(t, honest, func() bool {
		return p.server.Stats().PeersFlooded < workers && time.Since(start) < 20*time.Second
	})
	require.GreaterOrEqual(t, p.server.Stats().PeersFlooded, uint64(workers), "flooders not failed within 20 s")
	t.Logf("%d flooders cut off %v into the flood; an honest conn's round trip p50 meanwhile %v (%.1fx quiet %v, %d round trips)",
		workers, time.Since(start).Round(time.Millisecond), during, float64(during)/float64(quiet), quiet, n)
	after := roundTrips(t, honest, 200)
	t.Logf("its p50 with the cut-off flooders still sending %v (%.1fx quiet)", after, float64(after)/float64(quiet))

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
	st := p.server.Stats()
	t.Logf("%d CONNECTs from %d workers (keyed %v); honest dials %d/10; dropped before any key exchange %d, auth failures %d, peers flooded %d",
		sent.Load(), workers, key != nil, ok, st.ConnectsDropped, st.AuthFailures, st.PeersFlooded)
	require.GreaterOrEqual(t, ok, 9, "honest dials during the flood")
}

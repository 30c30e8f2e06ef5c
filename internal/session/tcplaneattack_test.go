package session

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/auth"
	"github.com/ucxnet/ucxnet/internal/lane"
)

// floodTCP holds n conns to ep in their preamble from the address from,
// each sending hello (nil: nothing, a silent conn) and then nothing more,
// and re-opens each as the listener cuts it, until the test ends. It
// returns how many conns it has opened so far.
func floodTCP(t *testing.T, from, ep string, n int, hello []byte) *atomic.Int64 {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	var opened atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				nc, err := d.Dial("tcp", ep)
				if err != nil {
					time.Sleep(time.Millisecond) // reset while connecting: again
					continue
				}
				opened.Add(1)
				if hello != nil {
					_, _ = nc.Write(hello)
				}
				cut := make(chan struct{})
				go func() {
					_, _ = io.Copy(io.Discard, nc) // until cut
					close(cut)
				}()
				select {
				case <-cut:
				case <-stop:
				}
				nc.Close()
			}
		}()
	}
	t.Cleanup(func() { close(stop); wg.Wait() })
	return &opened
}

// honestTCPDials dials p's listener n times with d over the kernel-TCP
// lane, one after the other (an accept loop closes what the listener
// accepts), and returns how many succeeded. With fallback, each dial is
// one that chose the lane over UCX (peers on two hosts with only tcp
// between them): if its TCP connection fails it takes UCX instead, and
// fellBack counts those.
func honestTCPDials(t *testing.T, p *pair, d *Dialer, psk []byte, n int, fallback bool) (ok, fellBack int) {
	go func() {
		for {
			s, err := p.ln.Accept()
			if err != nil {
				return
			}
			s.Close()
		}
	}()
	e, err := p.client.resolve(t.Context(), p.ln.Addr().String())
	require.NoError(t, err)
	eps := lane.ParseEndpoints(e.Meta[MetaTCP], true)
	for range n {
		ctx, cancel := context.WithTimeout(t.Context(), d.Timeout)
		ch := lane.Choice{Lane: lane.TCP, Reason: lane.ReasonOnlyTCP, Fallback: fallback}
		c, err := d.dialLane(ctx, p.client, e, ch, eps, psk)
		cancel()
		if err != nil {
			t.Logf("honest dial failed: %v", err)
			continue
		}
		ok++
		if name, _ := c.Lane(); name != LaneTCP {
			require.True(t, fallback, "lane %s", name)
			fellBack++
		}
		c.Close()
	}
	return ok, fellBack
}

// The kernel-TCP lane cannot be denied by holding its preamble places: an
// attacker (a process of its own, TestFloodHelper) holds as many conns as
// a listener keeps in their preamble, and re-opens each as it is cut;
// honest dials during the flood get through (≥ 9 of 10), and an honest
// conn's round trips are timed against their quiet value (logged). Silent conns the kernel holds (TCP_DEFER_ACCEPT); conns
// that sent a byte of their hello make room (the oldest first) for an
// honest dialer, which sends its hello at once: so even from the honest
// dialer's own address (127.0.0.1). Keyed hellos never proven, each
// costing the listener its share of the key exchange, are bounded per
// source: from another address (127.0.0.2) they leave the honest dialer
// its places. From the honest dialer's own address, faster than it can
// prove, they can take its place while it computes its proof: the lane is
// then denied to that address, and a dialer that chose it over UCX takes
// UCX instead (≥ 9 of 10 on either lane).
func TestTCPLaneAttackHeldPreambles(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	for _, tc := range []struct {
		name     string
		keyed    bool
		from     string
		hello    func(name string) []byte
		fallback bool
	}{
		{"silent", false, "127.0.0.1", func(string) []byte { return nil }, false},
		{"partial", false, "127.0.0.1", func(string) []byte { return []byte(lane.Magic[:1]) }, false},
		{"silent keyed", true, "127.0.0.1", func(string) []byte { return nil }, false},
		{"partial keyed", true, "127.0.0.1", func(string) []byte { return []byte(lane.Magic) }, false},
		{"unproven", true, "127.0.0.2", func(name string) []byte {
			return lane.AppendHello(nil, lane.Hello{PSK: true, ID: 1, Name: name,
				Challenge: auth.Dial([]byte("the attacker's guess"), name).Challenge()})
		}, false},
		{"unproven own source", true, "127.0.0.1", func(name string) []byte {
			return lane.AppendHello(nil, lane.Hello{PSK: true, ID: 1, Name: name,
				Challenge: auth.Dial([]byte("the attacker's guess"), name).Challenge()})
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTCPLanePair(t, Config{})
			if tc.fallback {
				needUCX(t)
			}
			honest, s := p.conns(t)
			defer honest.Close()
			go func() { _, _ = io.Copy(s, s); s.Close() }()
			quiet := roundTrips(t, honest, 200)
			d := p.dialer
			var psk []byte
			if tc.keyed {
				psk = key
				lc := ListenConfig{Transport: p.server, PSK: key}
				ln, err := lc.Listen(t.Context(), "")
				require.NoError(t, err)
				t.Cleanup(func() { ln.Close() })
				p.ln = ln
				d = &Dialer{Transport: p.client, PSK: key, Timeout: 10 * time.Second}
			}
			tl := p.ln.(*Listener).tcp
			ep := p.tcpEndpoint(t)
			if netip.MustParseAddrPort(ep).Addr() != netip.MustParseAddr("127.0.0.1") {
				t.Skipf("the listener's first endpoint is %s, not 127.0.0.1", ep)
			}
			hello := tc.hello(p.ln.Addr().String())
			startFloodProcess(t, floodModeEnv+"="+floodLane, floodAddrEnv+"="+ep, floodFromEnv+"="+tc.from,
				floodHelloEnv+"="+hex.EncodeToString(hello))
			if hello != nil {
				require.Eventually(t, func() bool { return tl.Pending() >= lane.MaxPendingPerSource }, 30*time.Second, time.Millisecond)
			}
			during := roundTrips(t, honest, 200)
			t.Logf("an honest conn's round trip p50 during the flood %v (%.1fx quiet %v)", during, float64(during)/float64(quiet), quiet)
			failures := p.server.Stats().AuthFailures
			ok, fellBack := honestTCPDials(t, p, d, psk, 10, tc.fallback)
			t.Logf("honest dials %d/10 (%d over UCX); attacker conns evicted or reset %d, in their preamble %d",
				ok, fellBack, p.server.LaneStats().OverCap, tl.Pending())
			require.GreaterOrEqual(t, ok, 9)
			require.Equal(t, failures, p.server.Stats().AuthFailures, "an evicted conn made no guess")
		})
	}
}

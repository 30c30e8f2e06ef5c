package session

// Conns sharded across workers (Config.Workers, shard.go): placement, peers
// that run one worker, and hostile worker addresses in the handshake.

import (
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
	"github.com/ucxnet/ucxnet/registry"
)

func TestDefaultWorkers(t *testing.T) {
	for cpus, want := range map[int]int{1: 1, 2: 1, 7: 1, 8: 4, 12: 6, 16: 8, 64: 8} {
		require.Equal(t, want, defaultWorkers(cpus), "%d CPUs", cpus)
	}
	t.Setenv(envWorkers, "3")
	require.Equal(t, 3, Config{}.withDefaults().Workers)
	require.Equal(t, maxWorkers, Config{Workers: 1000}.withDefaults().Workers)
}

// placement says, for the conns of a pair dialed from client to server,
// which worker carries each at either end, and requires each to be bound
// to a peer of its own shard whose address is the other end's worker.
func placement(t *testing.T, client, server []*testConn) (cs, ss []int) {
	t.Helper()
	for i := range client {
		c, s := client[i], server[i]
		require.Same(t, c.sh, c.peer().sh, "the dialed conn's peer is on its shard")
		require.Same(t, s.sh, s.peer().sh, "the accepted conn's peer is on its shard")
		require.Equal(t, string(s.sh.eng.Address()), c.peer().addr, "the dialer's conn goes to the listener's worker that carries it")
		require.Equal(t, string(c.sh.eng.Address()), s.peer().addr, "the listener's conn goes to the dialer's worker that carries it")
		cs, ss = append(cs, c.sh.idx), append(ss, s.sh.idx)
	}
	return cs, ss
}

// dialN makes n conns from d to ln, each carrying a round trip, and
// returns both ends; the accepted ends echo.
func dialN(t *testing.T, d *Dialer, ln net.Listener, n int) (client, server []*testConn) {
	t.Helper()
	for range n {
		acc := make(chan net.Conn, 1)
		go func() {
			s, err := ln.Accept()
			if err != nil {
				t.Errorf("accept: %v", err)
			}
			acc <- s
		}()
		c, err := d.Dial(Network, ln.Addr().String())
		require.NoError(t, err)
		s := <-acc
		require.NotNil(t, s)
		t.Cleanup(func() { c.Close(); s.Close() })
		go func() { _, _ = io.Copy(s, s) }()
		echoes(t, c, "ping")
		client, server = append(client, c.(*testConn)), append(server, s.(*testConn))
	}
	return client, server
}

// echoes requires c, whose peer echoes, to carry msg there and back.
func echoes(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second))) // a hang guard
	_, err := c.Write([]byte(msg))
	require.NoError(t, err, msg)
	got := make([]byte, len(msg))
	_, err = io.ReadFull(c, got)
	require.NoError(t, err, msg)
	require.Equal(t, msg, string(got))
	require.NoError(t, c.SetDeadline(time.Time{}))
}

// distinct returns the values of xs, sorted, once each.
func distinct(xs []int) []int {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return slices.Compact(xs)
}

// Between two transports of two workers each, conns spread over both
// workers at either end, each bound to the other end's worker that
// carries it, and the counters add up over the workers.
func TestWorkersShardConns(t *testing.T) {
	p := newPair(t, Config{Workers: 2})
	client, server := dialN(t, p.dialer, p.ln, 4)
	cs, ss := placement(t, client, server)
	require.Equal(t, []int{0, 1}, distinct(cs), "dialed conns by worker")
	require.Equal(t, []int{0, 1}, distinct(ss), "accepted conns by worker")
	st := p.server.Stats()
	require.EqualValues(t, 4, st.OpenConns)
	require.EqualValues(t, 4, st.Accepts)
	var in uint64
	for _, s := range server {
		in += s.Stats().BytesIn
	}
	require.EqualValues(t, 4*len("ping"), in, "the conns' bytes")
}

// A transport of two workers and one of one interoperate either way: the
// one-worker side sends and honours no FeatureWorkers, so every conn
// stays on the worker it knows (the listener's published one, and the
// dialer's worker that sent the CONNECT).
func TestWorkersMixedPeers(t *testing.T) {
	needUCX(t)
	for _, tc := range []struct {
		name             string
		dialer, listener int
	}{{"two dial one", 2, 1}, {"one dials two", 1, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			reg := registry.NewMemory()
			client, err := newUCXTransport(Config{Registry: reg, Workers: tc.dialer})
			require.NoError(t, err)
			defer client.Close()
			server, err := newUCXTransport(Config{Registry: reg, Workers: tc.listener})
			require.NoError(t, err)
			defer server.Close()
			ln, err := (&ListenConfig{Transport: server}).Listen(t.Context(), "")
			require.NoError(t, err)
			defer ln.Close()
			cc, sc := dialN(t, &Dialer{Transport: client, Timeout: 10 * time.Second}, ln, 4)
			cs, ss := placement(t, cc, sc)
			require.Equal(t, []int{0}, distinct(ss), "the listener keeps every conn on its published worker")
			if tc.dialer == 2 {
				require.Equal(t, []int{0, 1}, distinct(cs), "the dialer still spreads its conns")
			}
		})
	}
}

// nettest over the in-memory engine with two workers a side: runs
// without cgo too.
func TestMemNetTestWorkers(t *testing.T) {
	p := newMemPair(t, Config{Window: 256 << 10, Workers: 2})
	runNetTest(t, p.pair)
}

const acceptAttackEnv = "UCXNET_TEST_ACCEPT_ATTACK"

// TestAttackAcceptAddressHelper is not a test: it runs the attacks of
// TestAttackAcceptAddress in a child process, so that a crash inside UCX
// shows as a failed child rather than a dead test binary.
func TestAttackAcceptAddressHelper(t *testing.T) {
	if os.Getenv(acceptAttackEnv) == "" {
		t.Skip("helper process for TestAttackAcceptAddress; runs only as its child")
	}
	reg := registry.NewMemory()
	p := newPair(t, Config{Registry: reg, Workers: 2})
	honest, _ := dialN(t, p.dialer, p.ln, 4) // each client worker has a bound peer now
	const name = "impostor"
	imp := newRawPeer(t, p.client)
	require.NoError(t, reg.Register(t.Context(), registry.Entry{Name: name, Address: imp.eng.Address()}))
	bound := func(k int) (*peer, uintptr) { // a peer of client worker k with a known From
		p.client.mu.RLock()
		defer p.client.mu.RUnlock()
		for _, pr := range p.client.shards[k].peers {
			if pr.from.Load() != 0 {
				return pr, pr.from.Load()
			}
		}
		t.Fatalf("client worker %d has no bound peer", k)
		return nil, 0
	}
	cases := map[string]func(k int) []byte{
		"none":    func(int) []byte { return nil },
		"claimed": func(k int) []byte { pr, _ := bound(k); return []byte(pr.addr) },
	}
	for what, addr := range junkAddresses(imp.eng.Address()) {
		cases[what] = func(int) []byte { return addr }
	}
	for what, addrFor := range cases {
		for range 2 { // both client workers dial
			err, k := impostorAccept(t, p, imp, name, addrFor)
			require.Error(t, err, "%s: the dial succeeded", what)
			require.ErrorIs(t, err, ErrProtocol, "%s", what)
			require.ErrorContains(t, err, "worker address refused", what)
			if what == "claimed" {
				pr, from := bound(k)
				p.client.mu.RLock()
				for _, c := range pr.conns {
					require.True(t, slices.ContainsFunc(honest, func(h *testConn) bool { return h.Conn == c }), "the impostor's conn is on the claimed peer")
				}
				p.client.mu.RUnlock()
				require.Equal(t, from, pr.from.Load(), "the claimed peer's From changed")
			}
			t.Logf("%s (worker %d): %v", what, k, err)
		}
	}
	for _, c := range honest {
		echoes(t, c, "an honest conn after the attacks")
	}
	requireSurvived(t, p)
}

// impostorAccept dials name from p's client; imp, found under name,
// answers the CONNECT, from an endpoint to the worker it names, with an
// ACCEPT that says FeatureWorkers and names the worker address addrFor
// returns for the dialing worker. It returns the dial's error and the
// dialing worker.
func impostorAccept(t *testing.T, p *pair, imp *rawPeer, name string, addrFor func(k int) []byte) (error, int) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		c, err := p.dialer.Dial(Network, name)
		if c != nil {
			c.Close()
		}
		errc <- err
	}()
	k := -1
	timeout := time.After(20 * time.Second)
	for {
		select {
		case f := <-imp.frames:
			var hello stream.Hello
			if f.h.Kind != stream.KindConnect || hello.UnmarshalBinary(f.data) != nil {
				continue
			}
			require.NotZero(t, hello.Features&stream.FeatureWorkers, "the CONNECT offers FeatureWorkers")
			k = slices.IndexFunc(p.client.shards, func(s *shard) bool { return bytes.Equal(s.eng.Address(), hello.WorkerAddr) })
			require.GreaterOrEqual(t, k, 0, "the CONNECT names a client worker")
			reply := stream.Hello{ConnID: 4242, EagerMax: 1 << 20, Window: 1 << 20, Name: name, LocalName: name,
				Features: stream.FeatureWorkers, WorkerAddr: addrFor(k)}
			b, err := reply.MarshalBinary()
			require.NoError(t, err)
			var ep engine.EP = imp.endpointTo(t, hello.WorkerAddr)
			imp.sendFrameTo(t, ep, stream.Header{Kind: stream.KindAccept, ConnID: hello.ConnID}, b)
		case err := <-errc:
			return err, k
		case <-timeout:
			t.Fatal("the dial did not end")
		}
	}
}

// A listener's ACCEPT that says FeatureWorkers names the worker the dialer
// is to continue with: one that names none, a malformed address (which
// made UCX 1.13 abort the process in ucp_ep_create) or the worker of
// another peer whose frames come from elsewhere fails the dial with a
// protocol error, and the dialer's other conns carry on.
func TestAttackAcceptAddress(t *testing.T) {
	needUCX(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestAttackAcceptAddressHelper$", "-test.v")
	cmd.Env = append(os.Environ(), acceptAttackEnv+"=1", "GORACE=atexit_sleep_ms=0")
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	require.NoError(t, err, "the attacked process died")
	require.Contains(t, string(out), "survived")
}

// CONNECTs that offer FeatureWorkers from an endpoint the listener does
// not know: one naming a malformed address is dropped; one claiming the
// address of a dialer bound on the worker it arrived on is refused; one
// claiming a dialer's worker that is bound on another listener worker
// binds nothing: the conn it makes there waits for a first frame that
// only that dialer could address, and the dialer's peer keeps its From.
func TestAttackConnectClaimsWorkers(t *testing.T) {
	p := newPair(t, Config{Workers: 2})
	client, server := dialN(t, p.dialer, p.ln, 4)
	raw := newRawPeer(t, p.server)
	connect := func(id uint64, addr []byte) {
		hello := stream.Hello{ConnID: id, EagerMax: 1 << 20, Window: 1 << 16, Name: p.ln.Addr().String(),
			WorkerAddr: addr, Features: stream.FeatureWorkers}
		b, err := hello.MarshalBinary()
		require.NoError(t, err)
		raw.sendFrame(t, stream.Header{Kind: stream.KindConnect}, b)
	}
	st0 := p.server.Stats()
	n := uint64(0)
	for _, addr := range junkAddresses(raw.eng.Address()) {
		connect(100+n, addr)
		n++
	}
	waitStat(t, p.server, "bad frames", func(s Stats) uint64 { return s.BadFrames }, st0.BadFrames+n)

	froms := map[*peer]uintptr{}
	p.server.mu.RLock()
	for _, s := range server {
		froms[s.peer()] = s.peer().from.Load()
	}
	p.server.mu.RUnlock()
	// Those claiming a worker bound on the server's first worker (where
	// CONNECTs arrive) are refused.
	var claimsBound uint64
	p.server.mu.RLock()
	for _, c := range client {
		if pr := p.server.shards[0].peers[string(c.sh.eng.Address())]; pr != nil && pr.from.Load() != 0 {
			claimsBound++
		}
	}
	p.server.mu.RUnlock()
	require.NotZero(t, claimsBound)
	for i, c := range client {
		connect(200+uint64(i), c.sh.eng.Address())
	}
	waitStat(t, p.server, "refused", func(s Stats) uint64 { return s.Refused }, st0.Refused+claimsBound)
	time.Sleep(100 * time.Millisecond) // the rest are handled by now
	p.server.mu.RLock()
	for pr, from := range froms {
		require.Equal(t, from, pr.from.Load(), "a claim changed a bound peer's From")
	}
	p.server.mu.RUnlock()
	for i := range client {
		echoes(t, client[i], "an honest conn after the claims")
	}
	require.Zero(t, p.server.Stats().KeepAliveFailures)
}

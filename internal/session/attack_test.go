package session

// Tests that perform the attacks of the hostile-peer reviews, one or more
// per finding. Each asserts that the process survives,
// memory stays bounded and honest conns are unharmed.

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/cucx"
	"github.com/ucxnet/ucxnet/internal/stream"
	"github.com/ucxnet/ucxnet/registry"
)

const attackEnv = "UCXNET_TEST_ATTACK"

// junkAddresses are worker addresses that made UCX 1.13 abort the process
// in ucp_ep_create.
func junkAddresses(real []byte) map[string][]byte {
	junk := make([]byte, 200)
	rand.Read(junk)
	flipped := append([]byte(nil), real...)
	for i := range min(4, len(flipped)) {
		flipped[i] ^= 0xff
	}
	return map[string][]byte{"ff": {0xff}, "200 junk bytes": junk, "first 4 bytes flipped": flipped}
}

// TestAttackHelper is not a test: it runs the attacks of
// TestAttackBadWorkerAddress in a child process, so that a crash inside
// UCX shows as a failed child rather than a dead test binary.
func TestAttackHelper(t *testing.T) {
	if os.Getenv(attackEnv) == "" {
		t.Skip("helper process for TestAttackBadWorkerAddress; runs only as its child")
	}
	reg := registry.NewMemory()
	p := newPair(t, Config{Registry: reg})
	ln := pskListener(t, p, []byte("correct horse battery staple"))
	raw := newRawPeer(t, p.server)
	bad0 := p.server.Stats().BadFrames
	n := 0
	for what, addr := range junkAddresses(raw.eng.Address()) {
		// Through the wire: a CONNECT naming a live listener (with a key),
		// then one naming nobody.
		for _, name := range []string{ln.Addr().String(), "nobody"} {
			hello := stream.Hello{ConnID: uint64(100 + n), EagerMax: 1 << 20, Window: 1 << 16, Name: name,
				WorkerAddr: addr, Nonce: randomChallenge()}
			b, err := hello.MarshalBinary()
			require.NoError(t, err)
			raw.sendFrame(t, stream.Header{Kind: stream.KindConnect}, b)
			n++
		}
		// Through the registry: an entry whose address is garbage.
		dialRefusedEntry(t, p, reg, "evil-"+strings.ReplaceAll(what, " ", "-"), addr)
	}
	waitStat(t, p.server, "bad frames", func(s Stats) uint64 { return s.BadFrames }, bad0+uint64(n))
	requireSurvived(t, p)
}

// dialRefusedEntry registers name with the hostile address addr and
// requires a dial to it to be refused (ECONNREFUSED), not to crash.
func dialRefusedEntry(t *testing.T, p *pair, reg registry.Registry, name string, addr []byte) {
	t.Helper()
	require.NoError(t, reg.Register(context.Background(), registry.Entry{Name: name, Address: addr}))
	_, err := p.dialer.Dial(Network, name)
	require.Error(t, err, "dialing a hostile address")
	require.True(t, errors.Is(err, syscall.ECONNREFUSED), "%v", err)
	t.Logf("dial %s: %v", name, err)
}

// requireSurvived requires the attacked listener to still carry a conn,
// then tells the parent test (which reads the child's output) it survived.
func requireSurvived(t *testing.T, p *pair) {
	t.Helper()
	c, s := p.conns(t)
	go c.Write([]byte("alive"))
	buf := make([]byte, 5)
	_, err := io.ReadFull(s, buf)
	require.NoError(t, err)
	os.Stdout.WriteString("survived\n")
}

// Finding 1: a CONNECT carrying a malformed worker address, or a registry
// entry holding one, aborted the process inside UCX. Now the address is
// checked before UCX sees it.
func TestAttackBadWorkerAddress(t *testing.T) {
	needUCX(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestAttackHelper$", "-test.v")
	cmd.Env = append(os.Environ(), attackEnv+"=1", "GORACE=atexit_sleep_ms=0")
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	require.NoError(t, err, "the attacked process died")
	require.Contains(t, string(out), "survived")
}

// stalledPeer is a UCX worker that nobody progresses after the handshake:
// a peer that stops draining.
type stalledPeer struct {
	w  *cucx.Worker
	ep cucx.EP
}

func (s *stalledPeer) progress(t *testing.T, until func(evs []cucx.Event) bool) {
	t.Helper()
	var evs []cucx.Event
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		evs, _ = s.w.Progress(evs[:0], 64, nil)
		if until(evs) {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
	t.Fatal("stalled peer: condition not reached")
}

// Finding 3: one WINDOW frame granting 2^64-1 bytes, then silence, let a
// Write buffer without bound in C memory. Now the grant is capped and what
// UCX may hold for a peer is bounded: Write blocks, then fails.
func TestAttackHugeWindowThenStall(t *testing.T) {
	p := newPair(t, Config{})
	sc := stalledConn(t, p.ln, p.server, 4242)

	// From here on the peer never progresses again.
	sc.SetWriteDeadline(time.Now().Add(time.Second))
	chunk := make([]byte, 8<<10) // small writes: the copying path
	// What UCX holds for the peer is bounded by peerBufferMax; before it,
	// the transport itself takes what fits (a socket's buffers, a FIFO).
	const bound = peerBufferMax + 16<<20
	n := 0
	for {
		m, err := sc.Write(chunk)
		n += m
		if err != nil {
			var ne interface{ Timeout() bool }
			require.True(t, errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.ECONNRESET), "%v", err)
			break
		}
		require.LessOrEqual(t, n, bound, "Write kept buffering for a peer that drains nothing")
	}
	t.Logf("wrote %d MiB before Write blocked; UCX holds %d sends", n>>20, p.server.Stats().InflightSends)
	require.LessOrEqual(t, n, bound)
}

// Finding 4: a third worker that learnt a conn id (it shows in address
// strings) injected DATA and RST into that conn. Frames are now bound to
// the endpoint the conn was made with.
func TestAttackInjectionFromThirdWorker(t *testing.T) {
	p := newPair(t, Config{})
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	id := c.(*testConn).id
	require.Contains(t, c.LocalAddr().String(), formatID(id), "the id is public: the attack's premise")
	evil := newRawPeer(t, p.client)
	for seq := range 3 {
		evil.sendFrame(t, stream.Header{Kind: stream.KindData, ConnID: id, Seq: uint64(seq)}, []byte("EVIL"+string(rune('0'+seq))))
	}
	evil.sendFrame(t, stream.Header{Kind: stream.KindRst, ConnID: id, Aux: uint64(stream.RstAbort)}, nil)
	waitStat(t, p.client, "foreign frames", func(st Stats) uint64 { return st.ForeignFrames }, 4)

	go s.Write([]byte("good0good1good2good3"))
	buf := make([]byte, 20)
	_, err := io.ReadFull(c, buf)
	require.NoError(t, err)
	require.Equal(t, "good0good1good2good3", string(buf))
}

// Finding 7: CONNECTs naming nobody, each from another worker, left an
// endpoint behind each. Endpoints made only to refuse are closed soon.
func TestAttackConnectsLeaveNoEndpoints(t *testing.T) {
	p := newPair(t, Config{})
	c, s := p.conns(t) // one honest peer
	defer c.Close()
	defer s.Close()
	base := p.server.Stats().Peers
	for i := range 20 {
		raw := newRawPeer(t, p.server)
		hello := stream.Hello{ConnID: uint64(i + 1), EagerMax: 1 << 20, Window: 1 << 16, Name: "nobody", WorkerAddr: raw.eng.Address()}
		b, _ := hello.MarshalBinary()
		raw.sendFrame(t, stream.Header{Kind: stream.KindConnect}, b)
		select {
		case f := <-raw.frames:
			require.Equal(t, stream.KindRefuse, f.h.Kind)
			require.Equal(t, uint64(stream.RefuseNoListener), f.h.Aux)
		case <-time.After(5 * time.Second):
			t.Fatal("no REFUSE")
		}
	}
	require.Greater(t, p.server.Stats().Peers, base)
	require.Eventually(t, func() bool { return p.server.Stats().Peers == base }, 15*time.Second, 10*time.Millisecond,
		"endpoints made to refuse were not closed: %d peers, want %d", p.server.Stats().Peers, base)
	// The honest conn is untouched.
	go c.Write([]byte("ok"))
	buf := make([]byte, 2)
	_, err := io.ReadFull(s, buf)
	require.NoError(t, err)
}

// Finding 8: tiny out-of-order frames cost ~150 B of heap each while being
// charged 1 B against the window. Now each is charged its overhead, and the
// conn is reset before it holds more than its window.
func TestAttackTinyOutOfOrderFrames(t *testing.T) {
	p := newPair(t, Config{})
	raw := newRawPeer(t, p.server)
	sid := raw.connect(t, p.ln.Addr().String(), 31, 1<<20)
	pr0 := p.server.Stats().ProtocolResets
	for seq := 1; seq < 1<<16; seq++ {
		raw.sendFrame(t, stream.Header{Kind: stream.KindData, ConnID: sid, Seq: uint64(seq)}, []byte{'x'})
		if seq%4096 == 0 && p.server.Stats().ProtocolResets > pr0 {
			break
		}
	}
	waitStat(t, p.server, "protocol resets", func(st Stats) uint64 { return st.ProtocolResets }, pr0+1)
}

// Unaccepted conns hold at most preAcceptWindow of a peer's data each;
// Accept opens the full window.
func TestAcceptGrowsWindow(t *testing.T) {
	p := newPair(t, Config{})
	raw := newRawPeer(t, p.server)
	hello := stream.Hello{ConnID: 55, EagerMax: 1 << 20, Window: 1 << 20, Name: p.ln.Addr().String(), WorkerAddr: raw.eng.Address()}
	b, _ := hello.MarshalBinary()
	raw.sendFrame(t, stream.Header{Kind: stream.KindConnect}, b)
	var reply stream.Hello
	for reply.ConnID == 0 {
		select {
		case f := <-raw.frames:
			if f.h.Kind == stream.KindAccept && f.h.ConnID == 55 {
				require.NoError(t, reply.UnmarshalBinary(f.data))
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no ACCEPT")
		}
	}
	require.Equal(t, uint32(preAcceptWindow), reply.Window)
	sc, err := p.ln.Accept()
	require.NoError(t, err)
	defer sc.Close()
	for {
		select {
		case f := <-raw.frames:
			if f.h.Kind == stream.KindWindow && f.h.ConnID == 55 {
				require.Equal(t, uint64(DefaultWindow), f.h.Aux)
				return
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no WINDOW after Accept")
		}
	}
}

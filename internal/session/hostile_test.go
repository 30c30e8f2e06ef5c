package session

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// rawPeer speaks to a Transport with hand-made frames, built directly on
// the progress engine: the hostile peer of these tests.
type rawPeer struct {
	eng    engine.Engine // a UCX progress engine
	ep     engine.EP     // to target
	target []byte
	frames chan rawFrame
	// ids maps the conn ids connect chose to the listener's ids for them:
	// PING answers name the listener's, so that they count for this peer.
	ids sync.Map
}

type rawFrame struct {
	h    stream.Header
	data []byte
}

func (r *rawPeer) HandleEvents(evs []engine.Event) {
	for i := range evs {
		h, err := stream.DecodeHeader(evs[i].Header())
		if err != nil {
			continue
		}
		if h.Kind == stream.KindPing && h.Flags&stream.FlagReply == 0 {
			// Answer keepalive probes, as a live peer's engine does:
			// the conns the tests make by hand are to stay up.
			if lid, ok := r.ids.Load(h.ConnID); ok {
				pong := stream.Header{Kind: stream.KindPing, Flags: stream.FlagReply, ConnID: lid.(uint64), Aux: h.Aux}.Bytes()
				_ = r.sendErr(pong[:], nil)
			}
			continue
		}
		select {
		case r.frames <- rawFrame{h, append([]byte(nil), evs[i].Data...)}:
		default:
		}
	}
}

func newRawPeer(t testing.TB, target *Transport) *rawPeer {
	return newRawPeerAt(t, target.eng.Address(), func(self []byte) []byte { return rawTarget(target, self) })
}

// newRawPeerAt is newRawPeer for a target worker at addr, reached at the
// address reach returns for the raw peer's own.
func newRawPeerAt(t testing.TB, addr []byte, reach func(self []byte) []byte) *rawPeer {
	needUCX(t)
	r := &rawPeer{frames: make(chan rawFrame, 1024)}
	eng, err := testUCX.Start(Config{}, r)
	require.NoError(t, err)
	r.eng = eng
	r.target = addr
	w := eng.Acquire(true)
	r.ep, err = w.Connect(reach(eng.Address()))
	w.GiveBack()
	require.NoError(t, err)
	t.Cleanup(func() {
		w := eng.Acquire(true)
		w.CloseEP(r.ep, true)
		w.GiveBack()
		eng.Close(100 * time.Millisecond)
	})
	return r
}

// sendErr sends one frame as it is.
func (r *rawPeer) sendErr(hdr, data []byte) error { return r.sendErrTo(r.ep, hdr, data) }

// sendErrTo sends one frame as it is on the endpoint ep.
func (r *rawPeer) sendErrTo(ep engine.EP, hdr, data []byte) error {
	w := r.eng.Acquire(true)
	defer w.GiveBack()
	_, _, err := w.Send(ep, engine.Frames{Header: hdr, Data: data})
	return err
}

func (r *rawPeer) send(t testing.TB, hdr, data []byte) {
	require.NoError(t, r.sendErr(hdr, data))
}

func (r *rawPeer) sendFrame(t testing.TB, h stream.Header, data []byte) {
	r.sendFrameTo(t, r.ep, h, data)
}

// sendFrameTo is sendFrame on the endpoint ep.
func (r *rawPeer) sendFrameTo(t testing.TB, ep engine.EP, h stream.Header, data []byte) {
	h.Length = uint32(len(data))
	hb := h.Bytes()
	require.NoError(t, r.sendErrTo(ep, hb[:], data))
}

// endpointTo returns an endpoint to the worker at addr, as a listener
// makes one to answer a CONNECT: r.ep if that is where it goes, else a
// new one, closed when the test ends.
func (r *rawPeer) endpointTo(t testing.TB, addr []byte) engine.EP {
	if bytes.Equal(addr, r.target) {
		return r.ep
	}
	if s, err := testUCX.stripSharedMemory(addr); err == nil && len(s) > 0 {
		addr = s // as a peer that no kernel channel vouched for reaches it
	}
	w := r.eng.Acquire(true)
	ep, err := w.Connect(addr)
	w.GiveBack()
	require.NoError(t, err)
	t.Cleanup(func() {
		w := r.eng.Acquire(true)
		w.CloseEP(ep, true)
		w.GiveBack()
	})
	return ep
}

// connect runs the handshake as a dialer and returns the listener's conn
// id for our conn id.
func (r *rawPeer) connect(t *testing.T, name string, id uint64, window uint32) uint64 {
	hello := stream.Hello{ConnID: id, EagerMax: 1 << 20, Window: window, Name: name, LocalName: "raw", WorkerAddr: r.eng.Address()}
	b, err := hello.MarshalBinary()
	require.NoError(t, err)
	r.sendFrame(t, stream.Header{Kind: stream.KindConnect}, b)
	timeout := time.After(5 * time.Second)
	for {
		select {
		case f := <-r.frames:
			if f.h.Kind == stream.KindAccept && f.h.ConnID == id {
				var reply stream.Hello
				require.NoError(t, reply.UnmarshalBinary(f.data))
				r.ids.Store(id, reply.ConnID)
				return reply.ConnID
			}
			if f.h.Kind == stream.KindRefuse && f.h.ConnID == id {
				t.Fatalf("refused: %v", stream.RefuseCode(f.h.Aux))
			}
		case <-timeout:
			t.Fatal("no ACCEPT")
		}
	}
}

func waitStat(t *testing.T, tr *Transport, what string, get func(Stats) uint64, want uint64) {
	t.Helper()
	require.Eventually(t, func() bool { return get(tr.Stats()) >= want }, 10*time.Second, time.Millisecond,
		"%s: have %d, want >= %d", what, get(tr.Stats()), want)
}

// TestHostilePeer sends malformed frames: each is dropped or resets only
// the conn it names; other conns are untouched; counters record it.
func TestHostilePeer(t *testing.T) {
	p := newPair(t, Config{Window: 64 << 10})
	good, goodSrv := p.conns(t)
	defer good.Close()
	defer goodSrv.Close()
	raw := newRawPeer(t, p.server)
	name := p.ln.Addr().String()
	bad0 := p.server.Stats().BadFrames

	// Header-level garbage.
	raw.send(t, []byte("short"), nil)
	bogus := stream.Header{Kind: stream.KindData, ConnID: 1, Length: 5}.Bytes()
	bogus[1] = 99 // unknown kind
	raw.send(t, bogus[:], []byte("hello"))
	huge := stream.Header{Kind: stream.KindData, ConnID: 1, Length: 1 << 30}.Bytes()
	raw.send(t, huge[:], []byte("tiny"))
	badVersion := stream.Header{Kind: stream.KindData, ConnID: 1, Length: 1}.Bytes()
	badVersion[0] = 200
	raw.send(t, badVersion[:], []byte("x"))
	raw.send(t, []byte{}, []byte("no header at all"))
	garbageHello := stream.Header{Kind: stream.KindConnect, Length: 7}.Bytes()
	raw.send(t, garbageHello[:], []byte("garbage"))
	waitStat(t, p.server, "bad frames", func(s Stats) uint64 { return s.BadFrames }, bad0+6)

	// Data for a conn id nobody has.
	unk0 := p.server.Stats().UnknownConn
	raw.sendFrame(t, stream.Header{Kind: stream.KindData, ConnID: 0xdeadbeef}, []byte("who?"))
	waitStat(t, p.server, "unknown conn", func(s Stats) uint64 { return s.UnknownConn }, unk0+1)

	accept := func() net.Conn {
		c, err := p.ln.Accept()
		require.NoError(t, err)
		return c
	}
	expectReset := func(c net.Conn) {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			_, err := c.Read(make([]byte, 1<<16))
			if err != nil {
				require.True(t, errors.Is(err, syscall.ECONNRESET), "%v", err)
				return
			}
		}
	}

	// Duplicates are dropped; the stream stays intact.
	sid := raw.connect(t, name, 1001, 1<<20)
	sc := accept()
	raw.sendFrame(t, stream.Header{Kind: stream.KindData, ConnID: sid, Seq: 0}, []byte("ab"))
	raw.sendFrame(t, stream.Header{Kind: stream.KindData, ConnID: sid, Seq: 0}, []byte("XX"))
	raw.sendFrame(t, stream.Header{Kind: stream.KindData, ConnID: sid, Seq: 2}, []byte("ef"))
	raw.sendFrame(t, stream.Header{Kind: stream.KindData, ConnID: sid, Seq: 1}, []byte("cd"))
	raw.sendFrame(t, stream.Header{Kind: stream.KindData, ConnID: sid, Seq: 1}, []byte("YY"))
	raw.sendFrame(t, stream.Header{Kind: stream.KindFin, ConnID: sid, Seq: 3}, nil)
	got, err := io.ReadAll(sc)
	require.NoError(t, err)
	require.Equal(t, "abcdef", string(got))
	require.GreaterOrEqual(t, p.server.Stats().Duplicates, uint64(2))
	sc.Close()

	// Data beyond the window resets that conn.
	pr0 := p.server.Stats().ProtocolResets
	sid = raw.connect(t, name, 1002, 1<<20)
	sc = accept()
	chunk := make([]byte, 32<<10)
	for i := range 3 { // 96 KiB into a 64 KiB window
		raw.sendFrame(t, stream.Header{Kind: stream.KindData, ConnID: sid, Seq: uint64(i)}, chunk)
	}
	// (Wait before reading: a read would open the window.)
	waitStat(t, p.server, "protocol resets", func(s Stats) uint64 { return s.ProtocolResets }, pr0+1)
	expectReset(sc)

	// A far-future sequence number resets the conn.
	sid = raw.connect(t, name, 1003, 1<<20)
	sc = accept()
	raw.sendFrame(t, stream.Header{Kind: stream.KindData, ConnID: sid, Seq: 1 << 40}, []byte("future"))
	expectReset(sc)

	// Data after FIN resets the conn.
	sid = raw.connect(t, name, 1004, 1<<20)
	sc = accept()
	pr0 = p.server.Stats().ProtocolResets
	raw.sendFrame(t, stream.Header{Kind: stream.KindFin, ConnID: sid, Seq: 0}, nil)
	raw.sendFrame(t, stream.Header{Kind: stream.KindData, ConnID: sid, Seq: 1}, []byte("late"))
	waitStat(t, p.server, "protocol resets", func(s Stats) uint64 { return s.ProtocolResets }, pr0+1)
	_, err = sc.Read(make([]byte, 8)) // everything before the FIN was read: EOF
	require.Equal(t, io.EOF, err)
	_, err = sc.Write([]byte("x"))
	require.True(t, errors.Is(err, syscall.ECONNRESET), "%v", err)

	// A frame larger than our eager_max is refused.
	sid = raw.connect(t, name, 1005, 1<<20)
	sc = accept()
	raw.sendFrame(t, stream.Header{Kind: stream.KindData, ConnID: sid, Seq: 0}, make([]byte, DefaultEagerMax+1))
	expectReset(sc)

	// A flood of CONNECTs beyond the backlog is refused, not queued.
	refused0 := p.server.Stats().Refused
	backlog := p.server.cfg.Backlog
	for i := range backlog + 50 {
		hello := stream.Hello{ConnID: uint64(5000 + i), EagerMax: 1 << 20, Window: 1 << 16, Name: name, WorkerAddr: raw.eng.Address()}
		b, _ := hello.MarshalBinary()
		raw.sendFrame(t, stream.Header{Kind: stream.KindConnect}, b)
	}
	waitStat(t, p.server, "refused", func(s Stats) uint64 { return s.Refused }, refused0+50)
	require.LessOrEqual(t, len(p.ln.(*Listener).queue), backlog)

	// Through all of it the good conn is untouched.
	go good.Write([]byte("still fine"))
	buf := make([]byte, 10)
	_, err = io.ReadFull(goodSrv, buf)
	require.NoError(t, err)
	require.Equal(t, "still fine", string(buf))
}

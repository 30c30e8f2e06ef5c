package session

import (
	"testing"
	"time"

	"github.com/ucxnet/ucxnet/internal/auth"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// FuzzConnect drives CONNECT handling end to end over real UCX: a raw peer
// sends CONNECT frames whose Hello payload is the fuzz input to a live
// listener (with a key, so the pre-authentication path runs too), and the
// listener must keep serving honest dials. A payload that decodes as a
// Hello gets the raw peer's real worker address put back before it is
// sent: fuzzed addresses would make UCX try to reach arbitrary network
// addresses (ValidateAddress has its own fuzz target, in internal/cucx).
func FuzzConnect(f *testing.F) {
	key := []byte("correct horse battery staple")
	// The raw peer answers no keepalive PINGs: with the keepalive on, the
	// listener would rightly take it for dead after KeepAlive.
	p := newPair(f, Config{KeepAlive: -1})
	name := pskListener(f, p, key).Addr().String()
	raw := newRawPeer(f, p.server)
	// One answered CONNECT first: UCX's wireup between the two workers is
	// then complete. (UCX 1.13 can abort a process whose wireup reply to a
	// worker is still pending when that worker vanishes: RELIABILITY.md,
	// "Known UCX 1.13 hazards". The raw peer closes first at cleanup.)
	hello := stream.Hello{ConnID: 1, EagerMax: 1 << 20, Window: 1 << 16, Name: "nobody", WorkerAddr: raw.eng.Address()}
	hb0, _ := hello.MarshalBinary()
	raw.sendFrame(f, stream.Header{Kind: stream.KindConnect}, hb0)
	select {
	case <-raw.frames:
	case <-time.After(10 * time.Second):
		f.Fatal("no answer to the first CONNECT")
	}
	seed := func(h stream.Hello) []byte {
		b, err := h.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	f.Add(seed(stream.Hello{ConnID: 1, EagerMax: 1 << 20, Window: 1 << 16, Name: "x"}))
	f.Add(seed(stream.Hello{ConnID: 2, EagerMax: 1, Window: 1, Nonce: make([]byte, auth.ChallengeLen), MAC: []byte{1}}))
	f.Add([]byte{0xff, 0xff, 0xff})
	n := 0
	f.Fuzz(func(t *testing.T, payload []byte) {
		var h stream.Hello
		if h.UnmarshalBinary(payload) == nil {
			h.WorkerAddr = raw.eng.Address()
			if n%2 == 0 {
				h.Name = name // reach the listener, not only the refusal path
			}
			if b, err := h.MarshalBinary(); err == nil {
				payload = b
			}
		}
		if len(payload) == 0 || len(payload) > stream.MaxHelloLen {
			return
		}
		hb := stream.Header{Kind: stream.KindConnect, Length: uint32(len(payload))}.Bytes()
		if err := raw.sendErr(hb[:], payload); err != nil {
			t.Fatal(err)
		}
		n++
		if n%64 != 0 {
			return
		}
		// Every so often: an honest dial still works.
		d := Dialer{Transport: p.client, PSK: key, Timeout: 10 * time.Second}
		c, err := d.Dial(Network, name)
		if err != nil {
			t.Fatalf("honest dial after %d hostile CONNECTs: %v", n, err)
		}
		c.Close()
	})
}

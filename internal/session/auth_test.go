package session

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/auth"
	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
	"github.com/ucxnet/ucxnet/registry"
)

func pskListener(t testing.TB, p *pair, key []byte) *Listener {
	lc := ListenConfig{Transport: p.server, PSK: key}
	ln, err := lc.Listen(context.Background(), "")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	return ln
}

func TestPSK(t *testing.T) {
	p := newPair(t, Config{})
	key := []byte("correct horse battery staple")
	ln := pskListener(t, p, key)
	name := ln.Addr().String()

	t.Run("right key", func(t *testing.T) {
		d := Dialer{Transport: p.client, PSK: key, Timeout: 5 * time.Second}
		c, err := d.Dial(Network, name)
		require.NoError(t, err)
		_, err = c.Write([]byte("hello"))
		require.NoError(t, err)
		buf := make([]byte, 5)
		_, err = io.ReadFull(c, buf)
		require.NoError(t, err)
		require.Equal(t, "hello", string(buf))
		c.Close()
	})
	for _, tc := range []struct {
		name string
		key  []byte
	}{{"wrong key", []byte("wrong key, long enough")}, {"no key", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			f0 := p.server.Stats().AuthFailures
			d := Dialer{Transport: p.client, PSK: tc.key, Timeout: 5 * time.Second}
			_, err := d.Dial(Network, name)
			requirePromptRefusal(t, err)
			require.Greater(t, p.server.Stats().AuthFailures+p.client.Stats().AuthFailures, f0)
		})
	}
	t.Run("listener without key", func(t *testing.T) {
		open := pskListener(t, p, nil)
		d := Dialer{Transport: p.client, PSK: key, Timeout: 5 * time.Second}
		_, err := d.Dial(Network, open.Addr().String())
		require.True(t, errors.Is(err, syscall.ECONNREFUSED), "%v", err)
		require.Contains(t, err.Error(), "did not authenticate")
	})
	t.Run("key file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "psk")
		require.NoError(t, os.WriteFile(path, append(key, '\n'), 0o600))
		t.Setenv(EnvPSKFile, path)
		d := Dialer{Transport: p.client, Timeout: 5 * time.Second}
		c, err := d.Dial(Network, name)
		require.NoError(t, err)
		c.Close()
	})
}

// A handshake replayed by a raw peer (the proof from an earlier handshake)
// is refused: the listener's nonce is new for every conn, and a repeated
// CONNECT gets the ACCEPT of the conn it made, no new handshake.
func TestPSKReplay(t *testing.T) {
	p := newPair(t, Config{})
	key := []byte("sixteen byte key")
	ln := pskListener(t, p, key)
	name := ln.Addr().String()
	raw := newRawPeer(t, p.server)

	// First handshake, done right by the raw peer with the key.
	a := auth.Dial(key, name)
	nd := a.Challenge()
	handshake := func(id uint64) (lid uint64, nl []byte) {
		hello := stream.Hello{ConnID: id, EagerMax: 1 << 20, Window: 1 << 20, Name: name, WorkerAddr: raw.eng.Address(), Nonce: nd}
		b, err := hello.MarshalBinary()
		require.NoError(t, err)
		raw.sendFrame(t, stream.Header{Kind: stream.KindConnect}, b)
		for f := range raw.frames {
			if f.h.Kind == stream.KindAccept && f.h.ConnID == id {
				var reply stream.Hello
				require.NoError(t, reply.UnmarshalBinary(f.data))
				return reply.ConnID, reply.Nonce
			}
		}
		return 0, nil
	}
	waitFor := func(kind stream.Kind, id uint64) stream.Header {
		timeout := time.After(5 * time.Second)
		for {
			select {
			case f := <-raw.frames:
				if f.h.Kind == kind && f.h.ConnID == id {
					return f.h
				}
			case <-timeout:
				t.Fatalf("no %v for conn %d", kind, id)
			}
		}
	}
	lid, nl := handshake(7)
	a.SetListenerChallenge(nl)
	mac, err := a.Proof(auth.Dialer, 7, lid)
	require.NoError(t, err)
	proof := stream.Hello{ConnID: 7, EagerMax: 1 << 20, Window: 1 << 20, MAC: mac}
	b, _ := proof.MarshalBinary()
	raw.sendFrame(t, stream.Header{Kind: stream.KindAuth, ConnID: lid}, b)
	waitFor(stream.KindAuth, 7)

	// Replay: the same CONNECT (same nonce, same id) is a repeat of the
	// one that made conn lid: it gets that conn's ACCEPT again, and no
	// new handshake or conn.
	accepts := p.server.Stats().Accepts
	lid2, nl2 := handshake(7)
	require.Equal(t, lid, lid2, "a repeated CONNECT made another conn")
	require.Equal(t, nl, nl2)
	require.Equal(t, accepts, p.server.Stats().Accepts)

	// Replay under another conn id (same nonce), then the old proof.
	lid3, nl3 := handshake(8)
	require.NotEqual(t, lid, lid3)
	require.NotEqual(t, nl, nl3)
	raw.sendFrame(t, stream.Header{Kind: stream.KindAuth, ConnID: lid3}, b)
	h := waitFor(stream.KindRefuse, 8)
	require.Equal(t, uint64(stream.RefuseAuth), h.Aux)
}

// Keys shorter than MinPSKLen and key files that group or others can read
// are refused, each with an error that says why.
func TestPSKRules(t *testing.T) {
	_, err := resolvePSK([]byte("short"))
	require.ErrorContains(t, err, "too short")
	_, err = resolvePSK(make([]byte, MinPSKLen))
	require.NoError(t, err)

	dir := t.TempDir()
	path := filepath.Join(dir, "psk")
	require.NoError(t, os.WriteFile(path, []byte("a key of more than sixteen bytes\n"), 0o644))
	t.Setenv(EnvPSKFile, path)
	_, err = resolvePSK(nil)
	require.ErrorContains(t, err, "too open")
	require.NoError(t, os.Chmod(path, 0o600))
	k, err := resolvePSK(nil)
	require.NoError(t, err)
	require.Equal(t, "a key of more than sixteen bytes", string(k))
	require.NoError(t, os.WriteFile(path, []byte("short\n"), 0o600))
	_, err = resolvePSK(nil)
	require.ErrorContains(t, err, "too short")
}

// Finding 5 of the hostile-peer review: the listener's ACCEPT carried a MAC
// over a nonce the unauthenticated dialer chose, an offline oracle for the
// key. Now a dialer without the key gets the listener's nonce and nothing
// computed from the key.
func TestPSKNoOracle(t *testing.T) {
	p := newPair(t, Config{})
	key := []byte("correct horse battery staple")
	ln := pskListener(t, p, key)
	raw := newRawPeer(t, p.server)
	hello := stream.Hello{ConnID: 77, EagerMax: 1 << 20, Window: 1 << 20, Name: ln.Addr().String(),
		WorkerAddr: raw.eng.Address(), Nonce: make([]byte, auth.ChallengeLen)} // an attacker's fixed nonce
	b, err := hello.MarshalBinary()
	require.NoError(t, err)
	raw.sendFrame(t, stream.Header{Kind: stream.KindConnect}, b)
	timeout := time.After(5 * time.Second)
	for {
		select {
		case f := <-raw.frames:
			if f.h.Kind != stream.KindAccept || f.h.ConnID != 77 {
				continue
			}
			var reply stream.Hello
			require.NoError(t, reply.UnmarshalBinary(f.data))
			require.Len(t, reply.Nonce, auth.ChallengeLen)
			require.Empty(t, reply.MAC, "ACCEPT to an unproven dialer carries a MAC")
			// A wrong proof gets REFUSE, still with nothing computed from the key.
			proof := stream.Hello{ConnID: 77, EagerMax: 1 << 20, Window: 1 << 20, MAC: make([]byte, 32)}
			pb, _ := proof.MarshalBinary()
			raw.sendFrame(t, stream.Header{Kind: stream.KindAuth, ConnID: reply.ConnID}, pb)
			for {
				select {
				case f := <-raw.frames:
					if f.h.ConnID != 77 {
						continue
					}
					require.Equal(t, stream.KindRefuse, f.h.Kind, "answer to a wrong proof: %v", f.h)
					require.Empty(t, f.data)
					return
				case <-timeout:
					t.Fatal("no answer to a wrong proof")
				}
			}
		case <-timeout:
			t.Fatal("no ACCEPT")
		}
	}
}

// Finding 6: unproven dials (CONNECTs without a proof) cannot keep a dialer
// that has the key out: they wait apart from the backlog, a bounded number
// per dialing worker.
func TestPSKUnprovenDialsDoNotStarve(t *testing.T) {
	p := newPair(t, Config{Backlog: 64})
	key := []byte("correct horse battery staple")
	ln := pskListener(t, p, key)
	raw := newRawPeer(t, p.server)
	for i := range 64 {
		hello := stream.Hello{ConnID: uint64(9000 + i), EagerMax: 1 << 20, Window: 1 << 20, Name: ln.Addr().String(),
			WorkerAddr: raw.eng.Address(), Nonce: randomChallenge()}
		b, _ := hello.MarshalBinary()
		raw.sendFrame(t, stream.Header{Kind: stream.KindConnect}, b)
	}
	// Beyond the sender's share of unproven handshakes (hsbudget.go) the
	// CONNECTs were dropped before any conn or key exchange was made.
	require.Eventually(t, func() bool { return p.server.Stats().ConnectsDropped >= 64-senderBurst },
		10*time.Second, time.Millisecond)
	ln.mu.Lock()
	pending := ln.pendingAuth.Len()
	ln.mu.Unlock()
	require.LessOrEqual(t, pending, maxPendingAuthPerPeer)

	d := Dialer{Transport: p.client, PSK: key, Timeout: 4 * time.Second}
	c, err := d.Dial(Network, ln.Addr().String())
	require.NoError(t, err, "a dialer with the key was kept out by unproven dials")
	c.Close()
}

// capturedProof is what an impostor listener learns from one dial.
type capturedProof struct {
	nd, nl   []byte          // the dialer's and the impostor's challenges
	did, lid uint64          // the conn ids
	mac      []byte          // the dialer's proof (nil if it sent none)
	imp      *auth.Handshake // the impostor's side of the handshake, if it ran one
}

// impostorDial dials name with key; raw, found under name in the
// registry, answers as an impostor listener: its ACCEPT carries the
// challenge accept returns, and it keeps the dialer's AUTH and refuses it.
func impostorDial(t *testing.T, p *pair, raw *rawPeer, name string, key []byte, accept func(nd []byte) (nl []byte, imp *auth.Handshake)) (capturedProof, error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		d := Dialer{Transport: p.client, PSK: key, Timeout: 10 * time.Second}
		c, err := d.Dial(Network, name)
		if c != nil {
			c.Close()
		}
		errc <- err
	}()
	cp := capturedProof{lid: 4242}
	var dialer engine.EP // to the worker the CONNECT named, as a listener answers
	timeout := time.After(20 * time.Second)
	for {
		select {
		case f := <-raw.frames:
			var hello stream.Hello
			switch {
			case f.h.Kind == stream.KindConnect:
				require.NoError(t, hello.UnmarshalBinary(f.data))
				cp.nd, cp.did = hello.Nonce, hello.ConnID
				cp.nl, cp.imp = accept(cp.nd)
				reply := stream.Hello{ConnID: cp.lid, EagerMax: 1 << 20, Window: 1 << 20, Name: name, LocalName: name, Nonce: cp.nl}
				b, err := reply.MarshalBinary()
				require.NoError(t, err)
				dialer = raw.endpointTo(t, hello.WorkerAddr)
				raw.sendFrameTo(t, dialer, stream.Header{Kind: stream.KindAccept, ConnID: cp.did}, b)
			case f.h.Kind == stream.KindAuth && f.h.ConnID == cp.lid:
				require.NoError(t, hello.UnmarshalBinary(f.data))
				cp.mac = hello.MAC
				raw.sendFrameTo(t, dialer, stream.Header{Kind: stream.KindRefuse, ConnID: cp.did, Aux: uint64(stream.RefuseAuth)}, nil)
			}
		case err := <-errc:
			return cp, err
		case <-timeout:
			t.Fatal("the dial did not end")
		}
	}
}

// legacyDialerMAC is the dialer's proof of version 2 of the keyed
// handshake: HMAC keyed with a key derived from the PSK alone, over values
// an impostor listener knows.
func legacyDialerMAC(psk, nd, nl []byte, did, lid uint64, name string) []byte {
	kd := hmac.New(sha256.New, psk)
	kd.Write([]byte("ucxnet/2 key dial"))
	m := hmac.New(sha256.New, kd.Sum(nil))
	m.Write([]byte("ucxnet/2 dial\x00"))
	for _, b := range [][]byte{nd, nl} {
		m.Write(binary.LittleEndian.AppendUint16(nil, uint16(len(b))))
		m.Write(b)
	}
	m.Write(binary.LittleEndian.AppendUint64(nil, did))
	m.Write(binary.LittleEndian.AppendUint64(nil, lid))
	m.Write([]byte(name))
	return m.Sum(nil)
}

// Finding 6 of hostile-peer round 2: an impostor listener without the key
// (a registry entry under the dialed name is enough) kept the dialer's
// proof and tested 137,000 guesses of the key per second offline. Now the
// proof is keyed by a CPace session key: replayed against candidate keys,
// the true one included, it verifies none. The impostor's one guess is the
// share it sent, tested once per dial it answers.
func TestPSKDialerNoOracle(t *testing.T) {
	reg := registry.NewMemory()
	p := newPair(t, Config{Registry: reg})
	key := []byte("correct horse battery staple")
	const name = "impostor"
	raw := newRawPeer(t, p.client)
	require.NoError(t, reg.Register(t.Context(), registry.Entry{Name: name, Address: raw.eng.Address()}))
	guessing := func(guess []byte) func(nd []byte) ([]byte, *auth.Handshake) {
		return func(nd []byte) ([]byte, *auth.Handshake) {
			imp := auth.Accept(guess, name, nd)
			return imp.Challenge(), imp
		}
	}
	wrong := []byte("Tr0ub4dor&3, not the key")
	cp, err := impostorDial(t, p, raw, name, key, guessing(wrong))
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.NotEmpty(t, cp.mac, "the dialer sent no proof to the impostor")

	for _, c := range [][]byte{wrong, []byte("correct horse battery stapler"), []byte("sixteen byte key"), key} {
		require.False(t, hmac.Equal(cp.mac, legacyDialerMAC(c, cp.nd, cp.nl, cp.did, cp.lid, name)),
			"the proof verifies key %q offline (version 2 derivation)", c)
	}
	// The most the impostor can compute: the listener's side, with its
	// own scalar (the session key depends on the key only through the
	// share it sent).
	require.False(t, cp.imp.Verify(auth.Dialer, cp.mac, cp.did, cp.lid), "the proof verifies offline")

	// The online guess: an impostor whose share was made from the right
	// key checks the proof (and so the verifier above is no straw man).
	cp, err = impostorDial(t, p, raw, name, key, guessing(key))
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.True(t, cp.imp.Verify(auth.Dialer, cp.mac, cp.did, cp.lid))
}

// Peers of the earlier keyed handshake (a 32-byte nonce, no CPace share)
// fail closed both ways, and a listener's low-order share gets no proof.
func TestPSKOldPeers(t *testing.T) {
	reg := registry.NewMemory()
	p := newPair(t, Config{Registry: reg})
	key := []byte("correct horse battery staple")

	// An earlier dialer's CONNECT: REFUSE(auth).
	ln := pskListener(t, p, key)
	raw := newRawPeer(t, p.server)
	hello := stream.Hello{ConnID: 31, EagerMax: 1 << 20, Window: 1 << 20, Name: ln.Addr().String(),
		WorkerAddr: raw.eng.Address(), Nonce: randomChallenge()[:32]}
	b, err := hello.MarshalBinary()
	require.NoError(t, err)
	raw.sendFrame(t, stream.Header{Kind: stream.KindConnect}, b)
	timeout := time.After(10 * time.Second)
	for answered := false; !answered; {
		select {
		case f := <-raw.frames:
			if f.h.ConnID == 31 {
				require.Equal(t, stream.KindRefuse, f.h.Kind)
				require.Equal(t, uint64(stream.RefuseAuth), f.h.Aux)
				answered = true
			}
		case <-timeout:
			t.Fatal("no answer to an earlier dialer's CONNECT")
		}
	}

	// A listener's ACCEPT with an earlier challenge, or a low-order share:
	// the dial fails at once and no proof is sent.
	const name = "old"
	imp := newRawPeer(t, p.client)
	require.NoError(t, reg.Register(t.Context(), registry.Entry{Name: name, Address: imp.eng.Address()}))
	for what, nl := range map[string][]byte{"32-byte nonce": randomChallenge()[:32], "low-order share": make([]byte, auth.ChallengeLen)} {
		cp, err := impostorDial(t, p, imp, name, key, func([]byte) ([]byte, *auth.Handshake) { return nl, nil })
		require.ErrorIs(t, err, syscall.ECONNREFUSED, what)
		require.ErrorContains(t, err, "bad authentication challenge", what)
		require.Nil(t, cp.mac, "%s: the dialer sent a proof", what)
	}
}

// randomChallenge returns auth.ChallengeLen random bytes: a challenge's
// size, but no valid share behind it.
func randomChallenge() []byte {
	b := make([]byte, auth.ChallengeLen)
	rand.Read(b)
	return b
}

package ucxnet

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/stream"
)

func pskListener(t testing.TB, p *pair, key []byte) *Listener {
	lc := ListenConfig{Transport: p.server, PSK: key}
	ln, err := lc.listen(context.Background(), Network, "")
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
			start := time.Now()
			_, err := d.Dial(Network, name)
			require.True(t, errors.Is(err, syscall.ECONNREFUSED), "%v", err)
			require.Less(t, time.Since(start), 2*time.Second)
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
// is refused: the listener's nonce is new every time.
func TestPSKReplay(t *testing.T) {
	p := newPair(t, Config{})
	key := []byte("sixteen byte key")
	ln := pskListener(t, p, key)
	name := ln.Addr().String()
	raw := newRawPeer(t, p.server)

	// First handshake, done right by the raw peer with the key.
	nd := newNonce()
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
	proof := stream.Hello{ConnID: 7, EagerMax: 1 << 20, Window: 1 << 20, MAC: authMAC(key, roleDialer, nd, nl, 7, lid, name)}
	b, _ := proof.MarshalBinary()
	raw.sendFrame(t, stream.Header{Kind: stream.KindAuth, ConnID: lid}, b)
	waitFor(stream.KindAuth, 7)

	// Replay: same CONNECT (same nonce, same id), then the old proof.
	lid2, nl2 := handshake(7)
	require.NotEqual(t, nl, nl2)
	raw.sendFrame(t, stream.Header{Kind: stream.KindAuth, ConnID: lid2}, b)
	h := waitFor(stream.KindRefuse, 7)
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
		WorkerAddr: raw.eng.Address(), Nonce: make([]byte, nonceLen)} // an attacker's fixed nonce
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
			require.Len(t, reply.Nonce, nonceLen)
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
			WorkerAddr: raw.eng.Address(), Nonce: newNonce()}
		b, _ := hello.MarshalBinary()
		raw.sendFrame(t, stream.Header{Kind: stream.KindConnect}, b)
	}
	// Every CONNECT was answered (ACCEPT, then its conn evicted: RST).
	require.Eventually(t, func() bool { return p.server.Stats().AuthFailures >= 64-maxPendingAuthPerPeer },
		10*time.Second, time.Millisecond)
	ln.mu.Lock()
	pending := len(ln.pendingAuth)
	ln.mu.Unlock()
	require.LessOrEqual(t, pending, maxPendingAuthPerPeer)

	d := Dialer{Transport: p.client, PSK: key, Timeout: 4 * time.Second}
	c, err := d.Dial(Network, ln.Addr().String())
	require.NoError(t, err, "a dialer with the key was kept out by unproven dials")
	c.Close()
}

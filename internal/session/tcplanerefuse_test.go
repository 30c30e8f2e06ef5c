package session

import (
	"context"
	"crypto/rand"
	"io"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/auth"
	"github.com/ucxnet/ucxnet/internal/lane"
	"github.com/ucxnet/ucxnet/registry"
)

// rawPreamble sends hello on a raw TCP conn to p's listener and returns
// the listener's reply (its fixed part) and the conn.
func rawPreamble(t *testing.T, p *pair, hello []byte) (lane.Reply, net.Conn) {
	t.Helper()
	nc := rawTCP(t, p)
	_, err := nc.Write(hello)
	require.NoError(t, err)
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(30*time.Second)))
	var fix [lane.ReplyFixed]byte
	_, err = io.ReadFull(nc, fix[:])
	require.NoError(t, err)
	r, ok := lane.ParseReply(fix)
	require.True(t, ok)
	return r, nc
}

// A stranger is told one thing, "refused", with no key flag: for a name
// not here, a key setting not the listener's, and a failed proof; a
// preamble with dialer id 0 is refused as out of bounds.
func TestTCPLaneStrangerRefused(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	p := newTCPLanePair(t, Config{})
	plain := p.ln.Addr().String()
	lc := ListenConfig{Transport: p.server, PSK: key}
	kln, err := lc.Listen(t.Context(), "")
	require.NoError(t, err)
	defer kln.Close()
	keyed := kln.Addr().String()
	keyedHello := func(name string) []byte {
		return lane.AppendHello(nil, lane.Hello{PSK: true, ID: 1, Name: name, Challenge: auth.Dial(key, name).Challenge()})
	}
	for what, hello := range map[string][]byte{
		"no such name":            lane.AppendHello(nil, lane.Hello{ID: 1, Name: "no-such-name"}),
		"no such name, keyed":     keyedHello("no-such-name"),
		"keyed hello, plain name": keyedHello(plain),
	} {
		r, _ := rawPreamble(t, p, hello)
		require.Equal(t, lane.Reply{Status: lane.StatusRefused, ID: r.ID}, r, what)
	}
	// Unkeyed hello to the keyed listener: the same answer.
	q := &pair{server: p.server, ln: kln}
	r, _ := rawPreamble(t, q, lane.AppendHello(nil, lane.Hello{ID: 1, Name: keyed}))
	require.Equal(t, lane.Reply{Status: lane.StatusRefused, ID: r.ID}, r)
	// A wrong proof: one status byte, refused.
	r, nc := rawPreamble(t, q, keyedHello(keyed))
	require.Equal(t, lane.StatusOK, r.Status)
	_, err = io.ReadFull(nc, make([]byte, auth.ChallengeLen))
	require.NoError(t, err)
	_, err = nc.Write(make([]byte, auth.MACLen))
	require.NoError(t, err)
	st, err := io.ReadAll(nc)
	require.NoError(t, err)
	require.Equal(t, []byte{lane.StatusRefused}, st)

	oversized := p.server.LaneStats().Oversized
	nc = rawTCP(t, p)
	_, err = nc.Write(lane.AppendHello(nil, lane.Hello{Name: plain}))
	require.NoError(t, err)
	waitClosed(t, nc)
	require.Equal(t, oversized+1, p.server.LaneStats().Oversized, "dialer id 0")
}

// Failed key proofs are throttled per source: after guessBurst, a keyed
// hello from the source is refused before any challenge (its right key
// too, until the bucket refills, guessRate a second).
func TestTCPLaneGuessThrottle(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	p := newTCPLanePair(t, Config{})
	lc := ListenConfig{Transport: p.server, PSK: key}
	ln, err := lc.Listen(t.Context(), "")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			s, err := ln.Accept()
			if err != nil {
				return
			}
			s.Close()
		}
	}()
	wrong := &Dialer{Transport: p.client, PSK: []byte("wrong-key-wrong-key-wrong-key!!!"), Timeout: 10 * time.Second}
	for i := range guessBurst {
		_, err := wrong.Dial(Network, ln.Addr().String())
		require.ErrorIs(t, err, syscall.ECONNREFUSED)
		require.Contains(t, err.Error(), "pre-shared key mismatch", "guess %d", i)
	}
	_, err = wrong.Dial(Network, ln.Addr().String())
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.Contains(t, err.Error(), "too many key proofs", "throttled before the proof")
	// The bucket refills: a right key gets through again (a refusal
	// takes no token).
	right := &Dialer{Transport: p.client, PSK: key, Timeout: 10 * time.Second}
	require.Eventually(t, func() bool {
		c, err := right.Dial(Network, ln.Addr().String())
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 60*time.Second, 100*time.Millisecond)
}

// A kernel-TCP dial whose TCP connection fails — its port refuses, or it
// answers nothing — takes the UCX lane where the choice allows it; a
// listener's refusal does not, nor a choice without the fallback.
func TestTCPLaneFallbackToUCX(t *testing.T) {
	needUCX(t)
	defer func(d time.Duration) { tcpHandshakeTimeout = d }(tcpHandshakeTimeout)
	tcpHandshakeTimeout = 300 * time.Millisecond
	p := newPair(t, Config{Lane: LaneUCX})
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
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refusing := netip.MustParseAddrPort(closed.Addr().String())
	closed.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	require.NoError(t, err)
	defer silent.Close()
	other := newTCPLanePair(t, Config{}) // a ucxnet listener of another name
	dial := func(ep netip.AddrPort, fallback bool) (Stream, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		ch := lane.Choice{Lane: lane.TCP, Reason: lane.ReasonOnlyTCP, Fallback: fallback}
		return p.dialer.dialLane(ctx, p.client, e, ch, []netip.AddrPort{ep}, nil)
	}
	for what, ep := range map[string]netip.AddrPort{"refused": refusing, "silent": netip.MustParseAddrPort(silent.Addr().String())} {
		c, err := dial(ep, true)
		require.NoError(t, err, what)
		name, why := c.Lane()
		require.Equal(t, LaneUCX, name, what)
		require.True(t, strings.HasPrefix(why, lane.ReasonFallback), "%s: %s", what, why)
		c.Close()
		_, err = dial(ep, false)
		require.ErrorIs(t, err, syscall.ECONNREFUSED, what)
	}
	_, err = dial(netip.MustParseAddrPort(other.tcpEndpoint(t)), true)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.Contains(t, err.Error(), "refused the dial", "a listener's refusal stays")
}

// A name a peer claims for its end reaches RemoteAddr without control
// characters, terminal escapes or format characters; a plain or
// non-ASCII one unchanged.
func TestDisplayName(t *testing.T) {
	for in, want := range map[string]string{
		"client-1":                 "client-1",
		"my app é":                 "my app é",
		"\x1b[2J\x1b]0;pwned\x07x": "_[2J_]0;pwned_x",
		"a\nb\rc\x00d":             "a_b_c_d",
		"evil\u202egnp.exe":        "evil_gnp.exe",
		"bad\xffutf8":              "bad_utf8",
	} {
		require.Equal(t, want, displayName(in), "%q", in)
		require.NoError(t, registry.ValidName(displayName(in)))
	}
	b := make([]byte, 64)
	rand.Read(b)
	require.NoError(t, registry.ValidName(displayName(string(b))))
}

// The failed proofs per source are bounded in memory: beyond
// maxGuessSources sources recently failing, the rest share one bucket,
// and a source counted there is throttled by it.
func TestTCPGuessSourcesBounded(t *testing.T) {
	ts := &tcpSide{guesses: map[netip.Prefix]*Bucket{}}
	now := time.Now()
	src := func(i int) netip.Prefix {
		return lane.Source(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
	}
	for i := range maxGuessSources {
		ts.guessed(src(i), now)
	}
	require.Len(t, ts.guesses, maxGuessSources)
	late := src(maxGuessSources)
	for range guessBurst {
		require.True(t, ts.mayGuess(late, now))
		ts.guessed(late, now)
	}
	require.False(t, ts.mayGuess(late, now), "counted in the shared bucket")
	require.LessOrEqual(t, len(ts.guesses), maxGuessSources+1)
	// Once refilled, the sources are forgotten to make room.
	later := now.Add(time.Duration(guessBurst/guessRate+1) * time.Second)
	ts.guessed(src(maxGuessSources+1), later)
	require.Len(t, ts.guesses, 1)
	require.True(t, ts.mayGuess(late, later))
}

package lane

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/auth"
)

// A preamble reads back as written, with and without a key.
func TestHelloRoundTrip(t *testing.T) {
	for _, h := range []Hello{
		{ID: 7, Name: "orders", LocalName: "client-1"},
		{PSK: true, ID: 1 << 60, Name: "n", Challenge: bytes.Repeat([]byte{9}, auth.ChallengeLen)},
	} {
		b := AppendHello(nil, h)
		require.LessOrEqual(t, len(b), MaxPreamble)
		got, err := ReadHello(bytes.NewReader(b))
		require.NoError(t, err)
		require.Equal(t, h, got)
	}
	b := AppendReply(nil, Reply{Status: StatusBacklogFull, PSK: true, ID: 42}, nil)
	var fix [ReplyFixed]byte
	copy(fix[:], b)
	r, ok := ParseReply(fix)
	require.True(t, ok)
	require.Equal(t, Reply{Status: StatusBacklogFull, PSK: true, ID: 42}, r)
	fix[0] = 'X'
	_, ok = ParseReply(fix)
	require.False(t, ok, "no magic")
	copy(fix[:], AppendReply(nil, Reply{Status: StatusOK}, nil))
	_, ok = ParseReply(fix)
	require.False(t, ok, "OK with id 0")
}

// FuzzPreamble checks that reading a dialer's preamble never panics,
// reads at most MaxPreamble bytes, and that anything it accepts is a
// preamble AppendHello writes back byte for byte (so its names are
// printable ASCII and its id not 0).
func FuzzPreamble(f *testing.F) {
	f.Add(AppendHello(nil, Hello{ID: 7, Name: "orders", LocalName: "client-1"}))
	f.Add(AppendHello(nil, Hello{PSK: true, ID: 1 << 60, Name: "n", Challenge: bytes.Repeat([]byte{9}, auth.ChallengeLen)}))
	f.Add(AppendHello(nil, Hello{Name: "a"}))
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		h, err := ReadHello(r)
		require.LessOrEqual(t, len(in)-r.Len(), MaxPreamble)
		if err != nil {
			return
		}
		require.NotZero(t, h.ID)
		require.True(t, Printable(h.Name) && Printable(h.LocalName), "%q %q", h.Name, h.LocalName)
		require.Equal(t, in[:len(in)-r.Len()], AppendHello(nil, h))
	})
}

// A dialer's preamble is hostile: a wrong magic, unknown flags, names out
// of bounds or not printable are refused.
func TestReadHelloRefuses(t *testing.T) {
	good := AppendHello(nil, Hello{ID: 1, Name: "a", LocalName: "b"})
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for name, tc := range map[string]struct {
		b    []byte
		want error
	}{
		"magic":                {mutate(func(b []byte) []byte { b[0] = 'x'; return b }), ErrGarbage},
		"flags":                {mutate(func(b []byte) []byte { b[len(Magic)] = 2; return b }), ErrOversized},
		"reserved":             {mutate(func(b []byte) []byte { b[len(Magic)+1] = 1; return b }), ErrOversized},
		"empty name":           {AppendHello(nil, Hello{ID: 1, Name: ""}), ErrOversized},
		"long name":            {AppendHello(nil, Hello{ID: 1, Name: strings.Repeat("a", 256)}), ErrOversized},
		"space in name":        {AppendHello(nil, Hello{ID: 1, Name: "a b"}), ErrGarbage},
		"id 0":                 {AppendHello(nil, Hello{Name: "a"}), ErrOversized},
		"escape in local name": {AppendHello(nil, Hello{ID: 1, Name: "a", LocalName: "\x1b[2J\x1b]0;pwned\x07"}), ErrGarbage},
		"newline in name":      {AppendHello(nil, Hello{ID: 1, Name: "a\nb"}), ErrGarbage},
		"UTF-8 local name":     {AppendHello(nil, Hello{ID: 1, Name: "a", LocalName: "caf\u00e9\u202e"}), ErrGarbage},
	} {
		_, err := ReadHello(bytes.NewReader(tc.b))
		require.ErrorIs(t, err, tc.want, name)
	}
	_, err := ReadHello(bytes.NewReader(good[:HelloFixed-1]))
	require.Error(t, err, "cut short")
}

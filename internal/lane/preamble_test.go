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
		"magic":         {mutate(func(b []byte) []byte { b[0] = 'x'; return b }), ErrGarbage},
		"flags":         {mutate(func(b []byte) []byte { b[len(Magic)] = 2; return b }), ErrOversized},
		"reserved":      {mutate(func(b []byte) []byte { b[len(Magic)+1] = 1; return b }), ErrOversized},
		"empty name":    {AppendHello(nil, Hello{Name: ""}), ErrOversized},
		"long name":     {AppendHello(nil, Hello{Name: strings.Repeat("a", 256)}), ErrOversized},
		"space in name": {AppendHello(nil, Hello{Name: "a b"}), ErrGarbage},
	} {
		_, err := ReadHello(bytes.NewReader(tc.b))
		require.ErrorIs(t, err, tc.want, name)
	}
	_, err := ReadHello(bytes.NewReader(good[:HelloFixed-1]))
	require.Error(t, err, "cut short")
}

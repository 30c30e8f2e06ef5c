package session

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/stream"
)

// Writes coalesce into an open frame up to its max and the path's frame;
// Take closes it for sending, once.
func TestCork(t *testing.T) {
	var o Cork
	appended, open := o.Append([]byte("x"), 100)
	require.False(t, appended)
	require.False(t, open, "no frame is open")
	hdr := stream.Header{Kind: stream.KindData, ConnID: 7}.Bytes()
	o.Open(hdr[:], 42, 8, make([]byte, 3, 16), []byte("abc"))
	require.Equal(t, 3, o.Queued())
	appended, _ = o.Append([]byte("defgh"), 100)
	require.True(t, appended)
	appended, open = o.Append([]byte("i"), 100)
	require.False(t, appended, "past max")
	require.True(t, open, "still open: it must be sent first")
	var gotHdr [stream.HeaderLen]byte
	seq, buf, ok := o.Take(gotHdr[:])
	require.True(t, ok)
	require.Equal(t, hdr, gotHdr)
	require.Equal(t, uint64(42), seq)
	require.Equal(t, "abcdefgh", string(buf))
	_, _, ok = o.Take(gotHdr[:])
	require.False(t, ok, "taken once")
	require.Zero(t, o.Queued())

	o.Open(hdr[:], 43, 8, nil, []byte("ab"))
	appended, open = o.Append([]byte("cd"), 3)
	require.False(t, appended, "past the path's frame, learnt since it opened")
	require.True(t, open)
	require.Equal(t, "ab", string(o.Drop()))
	require.Nil(t, o.Drop())
}

// A failed send is reported once.
func TestCorkFail(t *testing.T) {
	var o Cork
	require.NoError(t, o.TakeErr())
	boom := errors.New("boom")
	o.Fail(boom)
	require.Equal(t, boom, o.TakeErr())
	require.NoError(t, o.TakeErr(), "reported once")
}

package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/stream"
)

// A Hello's segment limits bound the frames over its paths; a peer that
// names none has UCX's default segments, and other paths have no limit
// but the stream's.
func TestSegLimits(t *testing.T) {
	require.Equal(t, SegLimits{Shm: 8000, TCP: 63 << 10}, PeerSegLimits(stream.Hello{}), "an older peer has UCX's default segments")
	l := PeerSegLimits(stream.Hello{ShmFrame: 4000, TCPFrame: 20000})
	require.Equal(t, 4000, l.Limit(PathSharedMemory))
	require.Equal(t, 20000, l.Limit(PathTCP))
	require.Equal(t, stream.MaxPayload, l.Limit(PathOther))
}

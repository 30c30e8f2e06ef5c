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

// The send path follows the transports carrying the endpoint: shared
// memory sends zero-copy in shared-memory frames, tcp copies in tcp
// frames, anything else (RDMA, mixed) copies in network frames; an
// endpoint without transports yet is not known: asked again, its frames
// fit both segments, this side's and the peer's.
func TestChoosePath(t *testing.T) {
	c := PathConfig{ShmFrame: 8000, TCPFrame: 60000}
	for _, tc := range []struct {
		tl   []string
		want SendPath
	}{
		{nil, SendPath{Frame: 8000}},
		{[]string{"posix/memory", "cma/memory", "self/memory"}, SendPath{Kind: PathSharedMemory, Frame: 8000, ZeroCopy: true, Known: true}},
		{[]string{"sysv/memory"}, SendPath{Kind: PathSharedMemory, Frame: 8000, ZeroCopy: true, Known: true}},
		{[]string{"tcp/lo", "self/memory"}, SendPath{Kind: PathTCP, Frame: 60000, Known: true}},
		{[]string{"rc_mlx5/mlx5_0:1"}, SendPath{Frame: NetworkFrame, Known: true}},
		{[]string{"posix/memory", "tcp/lo"}, SendPath{Frame: NetworkFrame, Known: true}},
	} {
		require.Equal(t, tc.want, ChoosePath(tc.tl, c), "%v", tc.tl)
	}
	sp := ChoosePath([]string{"posix/memory"}, PathConfig{ShmFrame: 8000, FrameSize: 4096, CopyWrites: true})
	require.Equal(t, SendPath{Kind: PathSharedMemory, Frame: 4096, Known: true}, sp, "FrameSize and CopyWrites win")

	peer := SegLimits{Shm: 4000, TCP: 50000}
	require.Equal(t, 4000, ChoosePath(nil, c).PeerLimit(peer), "not known: the smaller of the peer's segments")
	require.Equal(t, 50000, ChoosePath([]string{"tcp/lo"}, c).PeerLimit(peer), "known tcp: the peer's tcp segments")
	require.Equal(t, 4000, ChoosePath([]string{"posix/memory"}, c).PeerLimit(peer))
}

package lane

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (dialed, accepted *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer ln.Close()
	d, err := net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	require.NoError(t, err)
	a, err := ln.AcceptTCP()
	require.NoError(t, err)
	t.Cleanup(func() { d.Close(); a.Close() })
	return d, a
}

// Bytes counts what the kernel moves for sendfile (ReadFrom from a file)
// and splice (ReadFrom from a socket), which the conn's own Read and
// Write never see, less the bytes before Established (the preamble),
// unread payload included.
func TestBytesCountsKernelCopies(t *testing.T) {
	d, a := tcpPair(t)
	src, dst := &Conn{TC: d}, &Conn{TC: a}
	_, err := d.Write([]byte("preamble"))
	require.NoError(t, err)
	_, err = io.ReadFull(a, make([]byte, 8))
	require.NoError(t, err)
	src.Established()
	_, err = d.Write([]byte("early")) // payload sent before the accepting side is established
	require.NoError(t, err)
	time.Sleep(10 * time.Millisecond) // let it arrive (passes either way)
	dst.Established()

	file := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(file, []byte(strings.Repeat("x", 100000)), 0o600))
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	n, err := d.ReadFrom(f) // sendfile
	require.NoError(t, err)
	require.EqualValues(t, 100000, n)

	p1, p2 := tcpPair(t) // splice from p2 into d
	_, err = p1.Write([]byte("spliced"))
	require.NoError(t, err)
	require.NoError(t, p1.CloseWrite())
	n, err = d.ReadFrom(p2)
	require.NoError(t, err)
	require.EqualValues(t, 7, n)
	require.NoError(t, d.CloseWrite())

	got, err := io.ReadAll(a)
	require.NoError(t, err)
	want := uint64(len("early") + 100000 + 7)
	require.EqualValues(t, want, len(got))
	in, out, ok := src.Bytes()
	require.True(t, ok)
	require.Equal(t, [2]uint64{0, want}, [2]uint64{in, out}, "the dialing side: in, out")
	in, out, ok = dst.Bytes()
	require.True(t, ok)
	require.Equal(t, [2]uint64{want, 0}, [2]uint64{in, out}, "the accepting side (the peer's FIN is no byte)")
}

// Info's round trip is the kernel's minimum (tcpi_min_rtt) at both ends,
// so that a side whose data the peer answers with delayed ACKs (which
// inflate the smoothed estimate) reports the path's round trip as the
// other side does.
func TestInfoRTTIsKernelMinimum(t *testing.T) {
	d, a := tcpPair(t)
	buf := make([]byte, 64)
	for range 50 { // request-reply, as a client and server do
		_, err := d.Write(buf)
		require.NoError(t, err)
		_, err = io.ReadFull(a, buf)
		require.NoError(t, err)
		_, err = a.Write(buf[:1])
		require.NoError(t, err)
		_, err = io.ReadFull(d, buf[:1])
		require.NoError(t, err)
	}
	for _, tc := range []*net.TCPConn{d, a} {
		var info *unix.TCPInfo
		rc, err := tc.SyscallConn()
		require.NoError(t, err)
		require.NoError(t, rc.Control(func(fd uintptr) {
			info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		}))
		require.NoError(t, err)
		rtt, closed := Info(tc)
		require.False(t, closed)
		t.Logf("min %dµs smoothed %dµs", info.Min_rtt, info.Rtt)
		require.EqualValues(t, info.Min_rtt, rtt.Microseconds())
	}
}

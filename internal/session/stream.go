package session

import (
	"net"
	"time"
)

// Stream is a conn as the face sees it, on either lane: a UCX stream
// (Conn) or a kernel-TCP one (LaneConn), chosen when it is dialed or
// accepted. Its methods are *net.TCPConn's, with bare errors (io.EOF,
// net.ErrClosed, os.ErrDeadlineExceeded, ErrReset and the other
// sentinels) that the face wraps in *net.OpError. A LaneConn also has
// ReadFrom and WriteTo (sendfile and splice); the face finds them as
// io.Copy does.
type Stream interface {
	Read(b []byte) (int, error)
	Write(b []byte) (int, error)
	Close() error
	CloseWrite() error
	SetLinger(sec int) error
	SetKeepAlive(on bool) error
	SetKeepAliveConfig(cfg net.KeepAliveConfig) error
	SetDeadline(t time.Time) error
	SetReadDeadline(t time.Time) error
	SetWriteDeadline(t time.Time) error
	LocalAddr() net.Addr
	RemoteAddr() net.Addr
	// Closed reports whether Close was called.
	Closed() bool
	// Stats returns a snapshot of the stream's statistics.
	Stats() ConnStats
	// Lane returns the lane the stream runs on and why it was chosen.
	Lane() (name, reason string)
	// Transports names the transports carrying the stream.
	Transports() []string
	// ReadState says what a Read would find now, without blocking (a
	// UCX stream's SyscallConn answers a pool's health check with it).
	ReadState() (data, ended bool)
	// LaneSocket returns the kernel-TCP socket, whose options are the
	// stream's; nil for a UCX stream, which has none of its own.
	LaneSocket() *net.TCPConn

	// accepted: Accept hands the stream to the application.
	accepted()
	// abort resets the stream: its listener closed with it queued.
	abort()
}

// A Stream is either.
var (
	_ Stream = (*Conn)(nil)
	_ Stream = (*LaneConn)(nil)
)

// ucxStream is c as a Stream, or err: a nil *Conn is no Stream.
func ucxStream(c *Conn, err error) (Stream, error) {
	if err != nil {
		return nil, err
	}
	return c, nil
}
